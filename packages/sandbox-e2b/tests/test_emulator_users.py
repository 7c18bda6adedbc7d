"""Users as envd has them: commands and file operations run as ``user`` (uid 1000, home
``/home/user``) unless a request names ``root``.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import pytest
from e2b import AsyncSandbox, AuthenticationException

pytestmark = pytest.mark.anyio

WHO = 'echo "$(id -u):$(id -g):$(whoami):$HOME:$USER:$LOGNAME"'


async def test_a_command_runs_as_user_unless_root_is_asked_for(raw: AsyncSandbox) -> None:
    assert (await raw.commands.run(WHO)).stdout == "1000:1000:user:/home/user:user:user\n"
    assert (await raw.commands.run(WHO, user="user")).stdout.startswith("1000:")
    assert (await raw.commands.run(WHO, user="root")).stdout == "0:0:root:/root:root:root\n"


async def test_a_command_starts_in_the_home_of_its_user(raw: AsyncSandbox) -> None:
    assert (await raw.commands.run("pwd")).stdout == "/home/user\n"
    assert (await raw.commands.run("pwd", user="root")).stdout == "/root\n"


async def test_the_sandbox_names_both_users(raw: AsyncSandbox) -> None:
    seen = await raw.commands.run("getent passwd user root | cut -d: -f1,3,4,6; getent group user")
    assert seen.stdout.splitlines() == [
        "user:1000:1000:/home/user",
        "root:0:0:/root",
        "user:x:1000:",
    ]


async def test_a_file_written_belongs_to_its_writer(raw: AsyncSandbox) -> None:
    await raw.files.write("/home/user/by-user.txt", "x")
    await raw.commands.run("echo x > /tmp/by-root.txt", user="root")
    assert (await raw.files.get_info("/home/user/by-user.txt")).owner == "user"
    mine = await raw.commands.run("stat -c %U:%G /home/user/by-user.txt")
    assert mine.stdout == "user:user\n"
    roots = await raw.commands.run("stat -c %U:%G /tmp/by-root.txt", user="root")
    assert roots.stdout == "root:root\n"
    assert (await raw.files.get_info("/tmp/by-root.txt", user="root")).owner == "root"


async def test_an_unknown_user_is_refused_as_envd_refuses_it(raw: AsyncSandbox) -> None:
    with pytest.raises(AuthenticationException, match=r"^invalid username: 'nobody-here'$"):
        await raw.commands.run("true", user="nobody-here")
    with pytest.raises(AuthenticationException, match="error looking up user 'nobody-here'"):
        await raw.files.write("/tmp/x", "x", user="nobody-here")
