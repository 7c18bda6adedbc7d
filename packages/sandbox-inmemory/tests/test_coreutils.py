"""Everyday commands print what GNU coreutils print, through the real provider on both backends.

Each expected text was printed by the same script run with the host's GNU bash 5.2 and
coreutils 9.1 (``LC_ALL=C``, in a fresh temporary folder); the comment above it names what was
run. The sandbox's user is ``user`` where the host's was ``root``, so owners read ``user user``.
"""

from __future__ import annotations

import hashlib
import re
import struct
import time

import pytest

from pai.sandbox import (
    CommandResult,
    Sandbox,
    create_sandbox,
    create_sandbox_session_manager,
)
from pai.sandbox_inmemory import InMemorySandboxProvider

pytestmark = pytest.mark.anyio


@pytest.fixture
def sandbox(provider: InMemorySandboxProvider) -> Sandbox:
    return create_sandbox(create_sandbox_session_manager(provider=provider).handle("thread-1"))


async def sh(sandbox: Sandbox, script: str, stdin: bytes | None = None) -> CommandResult:
    return await sandbox.run_command(script, stdin=stdin, timeout=60)


async def differences(
    sandbox: Sandbox, cases: list[tuple[str, str]], *, prefix: str = "", exit_zero: bool = True
) -> dict[str, tuple[str, str]]:
    """Each case's command (after ``prefix``) whose stdout (and, with ``exit_zero``, exit code 0)
    is not the expected one: command -> (stdout, stderr)."""
    found: dict[str, tuple[str, str]] = {}
    for command, expected in cases:
        result = await sh(sandbox, prefix + command)
        if result.stdout != expected or (exit_zero and result.exit_code != 0):
            found[command] = (result.stdout, result.stderr)
    return found


# A folder with fixed modification times, so `ls -l` prints the same text on any day.
FIXTURE = """rm -rf w; mkdir w && cd w
printf 'hello\\n' > a
printf '%02000d' 0 > big
mkdir d sub
touch d/x
chmod 755 a
chmod 600 big
touch -d '2024-01-15 10:30:00' a
touch -d '2023-11-30 08:00:00' big
touch -d '2023-06-01 00:00:00' d
touch -d '2023-07-01 00:00:00' sub
chmod 755 ..
touch -d '2024-02-01 12:00:00' . ..
"""


# -- ls ------------------------------------------------------------------------------------------


async def test_ls_of_an_empty_folder_prints_nothing(sandbox: Sandbox) -> None:
    # bash -c 'mkdir e; ls e' printed nothing
    result = await sh(sandbox, "mkdir e; ls e")
    assert (result.stdout, result.exit_code) == ("", 0)


async def test_ls_a_lists_dot_and_dot_dot(sandbox: Sandbox) -> None:
    # bash -c 'mkdir e; ls -a e'
    assert (await sh(sandbox, "mkdir e; ls -a e")).stdout == ".\n..\n"


async def test_ls_l_shows_modes_sizes_owners_and_modification_times(sandbox: Sandbox) -> None:
    # bash -c "$FIXTURE; ls -l"
    result = await sh(sandbox, FIXTURE + "ls -l")
    assert result.stdout == (
        "total 16\n"
        "-rwxr-xr-x 1 user user    6 Jan 15  2024 a\n"
        "-rw------- 1 user user 2000 Nov 30  2023 big\n"
        "drwxr-xr-x 2 user user 4096 Jun  1  2023 d\n"
        "drwxr-xr-x 2 user user 4096 Jul  1  2023 sub\n"
    ), result.stderr


async def test_ls_la_shows_dot_and_dot_dot_with_their_link_counts(sandbox: Sandbox) -> None:
    # bash -c "$FIXTURE; ls -la"
    assert (await sh(sandbox, FIXTURE + "ls -la")).stdout == (
        "total 24\n"
        "drwxr-xr-x 4 user user 4096 Feb  1  2024 .\n"
        "drwxr-xr-x 3 user user 4096 Feb  1  2024 ..\n"
        "-rwxr-xr-x 1 user user    6 Jan 15  2024 a\n"
        "-rw------- 1 user user 2000 Nov 30  2023 big\n"
        "drwxr-xr-x 2 user user 4096 Jun  1  2023 d\n"
        "drwxr-xr-x 2 user user 4096 Jul  1  2023 sub\n"
    )


# Each: bash -c "$FIXTURE; ls <options>" on the host.
LS_CASES: list[tuple[str, str]] = [
    # bash -c "$FIXTURE; ls -t"  (newest first)
    ("ls -t", "a\nbig\nsub\nd\n"),
    # bash -c "$FIXTURE; ls -S"  (largest first, ties by name)
    ("ls -S", "d\nsub\nbig\na\n"),
    # bash -c "$FIXTURE; ls -tr"
    ("ls -tr", "d\nsub\nbig\na\n"),
    # bash -c "$FIXTURE; ls -r"
    ("ls -r", "sub\nd\nbig\na\n"),
    # bash -c "$FIXTURE; ls -1 -R"
    ("ls -1 -R", ".:\na\nbig\nd\nsub\n\n./d:\nx\n\n./sub:\n"),
    # bash -c "$FIXTURE; ls -d d sub a"
    ("ls -d d sub a", "a\nd\nsub\n"),
    # bash -c "$FIXTURE; ls -F"
    ("ls -F", "a*\nbig\nd/\nsub/\n"),
    # bash -c "$FIXTURE; ls -ld . d"
    (
        "ls -ld . d",
        "drwxr-xr-x 4 user user 4096 Feb  1  2024 .\ndrwxr-xr-x 2 user user 4096 Jun  1  2023 d\n",
    ),
    # bash -c "$FIXTURE; ls -lh"
    (
        "ls -lh",
        "total 16K\n"
        "-rwxr-xr-x 1 user user    6 Jan 15  2024 a\n"
        "-rw------- 1 user user 2.0K Nov 30  2023 big\n"
        "drwxr-xr-x 2 user user 4.0K Jun  1  2023 d\n"
        "drwxr-xr-x 2 user user 4.0K Jul  1  2023 sub\n",
    ),
    # bash -c "$FIXTURE; ls -l --full-time a"
    ("ls -l --full-time a", "-rwxr-xr-x 1 user user 6 2024-01-15 10:30:00.000000000 +0000 a\n"),
    # files first, then each folder under its name; a missing operand is reported on stderr
    ("ls a nosuch d", "a\n\nd:\nx\n"),
]


async def test_ls_orders_and_formats_as_coreutils(sandbox: Sandbox) -> None:
    assert await differences(sandbox, LS_CASES, prefix=FIXTURE, exit_zero=False) == {}


async def test_ls_l_shows_a_link_and_its_target(sandbox: Sandbox) -> None:
    # bash -c 'echo hi > a; ln -s a l; ls -l l | awk ...' printed "lrwxrwxrwx 1 user user 1 l -> a"
    result = await sh(
        sandbox, "echo hi > a; ln -s a l; ls -l l | awk '{print $1,$2,$3,$4,$5,$9,$10,$11}'"
    )
    assert result.stdout == "lrwxrwxrwx 1 user user 1 l -> a\n"


async def test_ls_l_shows_a_recent_time_as_hours_and_minutes(sandbox: Sandbox) -> None:
    # GNU ls prints "Mon DD HH:MM" for the last six months, "Mon DD  YYYY" before
    result = await sh(
        sandbox,
        "day=$(date -d '2 days ago' +%F); touch -d \"$day 08:15\" r; "
        "date -d '2 days ago' '+%b %e'; ls -l r",
    )
    day, line = result.stdout.splitlines()
    assert line == f"-rw-r--r-- 1 user user 0 {day} 08:15 r"


# -- modification times and modes are the filesystem's -----------------------------------------------


async def test_a_new_file_carries_the_time_it_was_written_as_ls_stat_and_find_see_it(
    sandbox: Sandbox,
) -> None:
    # bash -c 'echo x > f; date -d @$(stat -c %Y f) "+%b %e %H:%M"; ls -l f | cut -c 26-37'
    # printed the same text twice
    before = int(time.time())
    result = await sh(
        sandbox,
        "echo x > f; stat -c %Y f; find . -newer f | wc -l; "
        "date -d @$(stat -c %Y f) '+%b %e %H:%M'; ls -l f | cut -c 26-37",
    )
    after = time.time()
    written, newer, shown_by_date, shown_by_ls = result.stdout.splitlines()
    assert before <= int(written) <= after
    assert newer == "0"
    assert shown_by_ls == shown_by_date


async def test_touch_cp_p_and_find_see_the_same_times(sandbox: Sandbox) -> None:
    # bash -c 'echo x > a; chmod 640 a; touch -d "2024-01-15 10:30:00" a; cp a b; cp -p a c;
    #   mkdir d; chmod 700 d; touch d/f; touch -d 2023-01-01 d/f d; cp -r d d2; cp -a d d3;
    #   stat -c "%n %a %y" a c d d3 d3/f; stat -c "%n %a" b d2'
    script = (
        'echo x > a; chmod 640 a; touch -d "2024-01-15 10:30:00" a; cp a b; cp -p a c; '
        "mkdir d; chmod 700 d; touch d/f; touch -d 2023-01-01 d/f d; cp -r d d2; cp -a d d3; "
        'stat -c "%n %a %y" a c d d3 d3/f; stat -c "%n %a" b d2'
    )
    result = await sh(sandbox, script)
    assert result.stdout == (
        "a 640 2024-01-15 10:30:00.000000000 +0000\n"
        "c 640 2024-01-15 10:30:00.000000000 +0000\n"
        "d 700 2023-01-01 00:00:00.000000000 +0000\n"
        "d3 700 2023-01-01 00:00:00.000000000 +0000\n"
        "d3/f 644 2023-01-01 00:00:00.000000000 +0000\n"
        "b 640\n"
        "d2 700\n"
    ), result.stderr


async def test_touch_takes_dates_stamps_and_reference_files(sandbox: Sandbox) -> None:
    # bash -c 'echo x > a; touch -d "2024-01-15 10:30" a; touch -r a ref;
    #   touch -t 202001021530.45 t; touch -m -d @0 m; stat -c "%n %Y" ref t m'
    result = await sh(
        sandbox,
        'echo x > a; touch -d "2024-01-15 10:30" a; touch -r a ref; '
        'touch -t 202001021530.45 t; touch -m -d @0 m; stat -c "%n %Y" ref t m',
    )
    assert result.stdout == "ref 1705314600\nt 1577979045\nm 0\n"


async def test_find_newer_and_mtime_count_as_gnu_find_does(sandbox: Sandbox) -> None:
    # bash -c 'touch -d 2020-01-01 old; touch new; find . -newer old | sort; echo -;
    #   find . -mtime +365 | sort; echo -; find . -mtime -1 | sort; echo -; find . -mtime +0'
    result = await sh(
        sandbox,
        "touch -d 2020-01-01 old; touch new; find . -newer old | sort; echo -; "
        "find . -mtime +365 | sort; echo -; find . -mtime -1 | sort; echo -; find . -mtime +0",
    )
    assert result.stdout == ".\n./new\n-\n./old\n-\n.\n./new\n-\n./old\n"


async def test_a_folder_time_changes_when_an_entry_is_added_or_removed(sandbox: Sandbox) -> None:
    # bash -c 'mkdir d; touch -d 2020-01-01 d; stat -c %Y d; touch d/new; stat -c %Y d' printed
    # 1577836800, then the time of the touch (as did removing d/new)
    before = int(time.time())
    result = await sh(
        sandbox,
        "mkdir d; touch -d 2020-01-01 d; stat -c %Y d; touch d/new; stat -c %Y d; "
        "touch -d 2020-01-01 d; rm d/new; stat -c %Y d",
    )
    old, added, removed = (int(value) for value in result.stdout.split())
    assert old == 1577836800
    assert before <= added <= time.time()
    assert before <= removed <= time.time()


async def test_moving_a_folder_keeps_the_times_inside_it(sandbox: Sandbox) -> None:
    # bash -c 'mkdir -p a/b/c; touch -d 2020-01-01 a/b/c a/b a; mkdir x; touch -d 2020-01-01 x;
    #   mv a x/; stat -c "%n %Y" x/a x/a/b x/a/b/c; [ $(stat -c %Y x) -gt 1600000000 ] && echo x'
    result = await sh(
        sandbox,
        "mkdir -p a/b/c; touch -d 2020-01-01 a/b/c a/b a; mkdir x; touch -d 2020-01-01 x; "
        'mv a x/; stat -c "%n %Y" x/a x/a/b x/a/b/c; [ $(stat -c %Y x) -gt 1600000000 ] && echo x',
    )
    assert result.stdout == "x/a 1577836800\nx/a/b 1577836800\nx/a/b/c 1577836800\nx\n"


async def test_rewriting_a_file_keeps_its_mode(sandbox: Sandbox) -> None:
    # bash -c 'echo x > f; chmod 755 f; echo y > f; stat -c %a f'
    assert (await sh(sandbox, "echo x > f; chmod 755 f; echo y > f; stat -c %a f")).stdout == (
        "755\n"
    )


async def test_a_write_into_a_missing_folder_fails_and_creates_nothing(sandbox: Sandbox) -> None:
    # bash -c 'touch nodir/f; echo $?; echo x > nod2/g; echo $?; echo y >> nod3/h; echo $?;
    #   echo q | tee nod4/t; echo $?; ls' printed "1 1 1 q 1" (a line each) and nothing for ls,
    #   with "touch: cannot touch 'nodir/f': No such file or directory" and
    #   "tee: nod4/t: No such file or directory" among its errors
    result = await sh(
        sandbox,
        "touch nodir/f; echo $?; echo x > nod2/g; echo $?; echo y >> nod3/h; echo $?; "
        "echo q | tee nod4/t; echo $?; ls",
    )
    assert result.stdout.splitlines()[-3:] == ["1", "q", "1"]
    assert [line for line in result.stdout.splitlines() if line in ("0", "1")] == ["1"] * 4
    assert "touch: cannot touch 'nodir/f': No such file or directory\n" in result.stderr
    assert "tee: nod4/t: No such file or directory\n" in result.stderr


# -- stat -----------------------------------------------------------------------------------------


async def test_stat_formats_and_shows_a_link_as_itself(sandbox: Sandbox) -> None:
    # bash -c 'printf "hi\n" > a; : > empty; mkdir d; ln -s a l;
    #   touch -d "2024-01-15 10:30:00" a empty d; stat -c "%n %s %a %A %F %Y %y %h %b %B %o %N" a empty d;
    #   stat -c "%n %s %A %F %N" l; stat -L -c "%n %F %s" l; stat -c "%-8n|%8s|%08s|" a'
    result = await sh(
        sandbox,
        'printf "hi\\n" > a; : > empty; mkdir d; ln -s a l; '
        'touch -d "2024-01-15 10:30:00" a empty d; '
        'stat -c "%n %s %a %A %F %Y %y %h %b %B %o %N" a empty d; '
        'stat -c "%n %s %A %F %N" l; stat -L -c "%n %F %s" l; stat -c "%-8n|%8s|%08s|" a',
    )
    assert result.stdout == (
        "a 3 644 -rw-r--r-- regular file 1705314600 2024-01-15 10:30:00.000000000 +0000 1 8 512 "
        "4096 'a'\n"
        "empty 0 644 -rw-r--r-- regular empty file 1705314600 2024-01-15 10:30:00.000000000 "
        "+0000 1 0 512 4096 'empty'\n"
        "d 4096 755 drwxr-xr-x directory 1705314600 2024-01-15 10:30:00.000000000 +0000 2 8 512 "
        "4096 'd'\n"
        "l 1 lrwxrwxrwx symbolic link 'l' -> 'a'\n"
        "l regular file 3\n"
        "a       |       3|00000003|\n"
    ), result.stderr


async def test_stat_prints_the_coreutils_layout(sandbox: Sandbox) -> None:
    # bash -c 'printf "hello\n" > a; touch -d "2024-01-15 10:30:00" a; stat a' printed this
    # layout, with the disk's device and inode numbers, a change time and a birth time: the
    # in-memory filesystem has no devices or inode numbers (0), one time per entry and no birth
    # time ("-").
    result = await sh(sandbox, 'printf "hello\\n" > a; touch -d "2024-01-15 10:30:00" a; stat a')
    assert result.stdout == (
        "  File: a\n"
        "  Size: 6         \tBlocks: 8          IO Block: 4096   regular file\n"
        "Device: 0,0\tInode: 0           Links: 1\n"
        "Access: (0644/-rw-r--r--)  Uid: ( 1000/    user)   Gid: ( 1000/    user)\n"
        "Access: 2024-01-15 10:30:00.000000000 +0000\n"
        "Modify: 2024-01-15 10:30:00.000000000 +0000\n"
        "Change: 2024-01-15 10:30:00.000000000 +0000\n"
        " Birth: -\n"
    )


async def test_stat_of_a_missing_file_fails(sandbox: Sandbox) -> None:
    # bash -c 'stat nope'
    result = await sh(sandbox, "stat nope")
    assert result.stderr == "stat: cannot statx 'nope': No such file or directory\n"
    assert result.exit_code == 1


# -- realpath -------------------------------------------------------------------------------------


async def test_realpath_resolves_links_and_dots_as_coreutils(sandbox: Sandbox) -> None:
    # bash -c 'mkdir -p a/b; ln -s a/b lb; touch a/f; realpath a/b/.. lb lb/..; realpath -s lb;
    #   realpath -m a/nope/x; realpath --relative-to=a/b a/f; realpath nope; echo $?;
    #   realpath a/nope/x; echo $?; realpath -q a/nope/x; echo $?; realpath a/f/x; echo $?'
    # (run in a temporary folder, shown here as /workspace)
    result = await sh(
        sandbox,
        "mkdir -p a/b; ln -s a/b lb; touch a/f; realpath a/b/.. lb lb/..; realpath -s lb; "
        "realpath -m a/nope/x; realpath --relative-to=a/b a/f; realpath nope; echo $?; "
        "realpath a/nope/x; echo $?; realpath -q a/nope/x; echo $?; realpath a/f/x; echo $?",
    )
    assert result.stdout == (
        "/workspace/a\n/workspace/a/b\n/workspace/a\n/workspace/lb\n/workspace/a/nope/x\n"
        "../f\n/workspace/nope\n0\n1\n1\n1\n"
    )
    assert result.stderr == (
        "realpath: a/nope/x: No such file or directory\nrealpath: a/f/x: Not a directory\n"
    )


# -- identity: uname, id, whoami, hostname --------------------------------------------------------------


def expected_hostname(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:12]


async def test_uname_prints_the_fixed_linux_identity(sandbox: Sandbox) -> None:
    # bash -c 'uname; uname -s; uname -m; uname -sm; uname -o; uname -a' on an x86-64 Linux host
    # printed "Linux", "Linux", "x86_64", "Linux x86_64", "GNU/Linux" and "Linux HOST RELEASE
    # VERSION x86_64 GNU/Linux"; the host name, release and version here are the documented ones
    name = expected_hostname("thread-1")
    result = await sh(
        sandbox, "uname; uname -s; uname -m; uname -sm; uname -o; uname -n; uname -r; uname -a"
    )
    assert result.stdout.splitlines() == [
        "Linux",
        "Linux",
        "x86_64",
        "Linux x86_64",
        "GNU/Linux",
        name,
        "6.1.0-pai-inmemory",
        f"Linux {name} 6.1.0-pai-inmemory #1 SMP PREEMPT_DYNAMIC pai-sandbox-inmemory x86_64 "
        "GNU/Linux",
    ]


async def test_uname_refuses_a_bad_option_as_coreutils_does(sandbox: Sandbox) -> None:
    # bash -c 'uname -x'
    result = await sh(sandbox, "uname -x")
    assert result.stderr == (
        "uname: invalid option -- 'x'\nTry 'uname --help' for more information.\n"
    )
    assert result.exit_code == 1


async def test_the_user_is_the_same_everywhere(sandbox: Sandbox) -> None:
    # bash -c 'id; id -u; id -g; id -un; id -gn; id -G; whoami' (as uid 0 on the host: root)
    result = await sh(
        sandbox,
        "id; id -u; id -g; id -un; id -gn; id -G; whoami; echo $USER; "
        "touch f; ls -l f | awk '{print $3, $4}'; stat -c '%U %G %u %g' f",
    )
    assert result.stdout.splitlines() == [
        "uid=1000(user) gid=1000(user) groups=1000(user)",
        "1000",
        "1000",
        "user",
        "user",
        "1000",
        "user",
        "user",
        "user user",
        "user user 1000 1000",
    ]


async def test_id_errors_as_coreutils_does(sandbox: Sandbox) -> None:
    # bash -c 'id -n; echo $?; id nosuch; echo $?; id root'
    result = await sh(sandbox, "id -n; echo $?; id nosuch; echo $?; id root")
    assert result.stdout == "1\n1\nuid=0(root) gid=0(root) groups=0(root)\n"
    assert result.stderr == (
        "id: cannot print only names or real IDs in default format\nid: 'nosuch': no such user\n"
    )


async def test_hostname_is_the_instances_and_agrees_with_uname_and_hostname_variable(
    provider: InMemorySandboxProvider,
) -> None:
    manager = create_sandbox_session_manager(provider=provider)
    first = create_sandbox(manager.handle("thread-1"))
    second = create_sandbox(manager.handle("thread-2"))
    names = [
        (await sh(box, "hostname; uname -n; echo $HOSTNAME")).stdout.split()
        for box in (first, second)
    ]
    assert names == [[expected_hostname("thread-1")] * 3, [expected_hostname("thread-2")] * 3]


async def test_hostname_is_stable_for_a_key_across_incarnations(
    provider: InMemorySandboxProvider,
) -> None:
    sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle("k"))
    before = (await sh(sandbox, "hostname")).stdout
    await provider.forget("k")
    after = await sh(sandbox, "hostname")
    assert after.environment_reset
    assert after.stdout == before == expected_hostname("k") + "\n"


async def test_hostname_cannot_be_set(sandbox: Sandbox) -> None:
    # bash -c 'hostname other' as a user that is not root
    result = await sh(sandbox, "hostname other")
    assert result.stderr == "hostname: you must be root to change the host name\n"
    assert result.exit_code == 1


# -- mktemp ---------------------------------------------------------------------------------------


async def test_mktemp_creates_a_private_file_and_folder(sandbox: Sandbox) -> None:
    # bash -c 'stat -c "%a %F" $(mktemp) $(mktemp -d)' printed "600 regular empty file" and
    # "700 directory"; mktemp prints /tmp/tmp. and 10 random letters or digits
    result = await sh(
        sandbox, 'f=$(mktemp); d=$(mktemp -d); echo "$f"; echo "$d"; stat -c "%a %F" "$f" "$d"'
    )
    file_path, folder_path, file_mode, folder_mode = result.stdout.splitlines()
    assert re.fullmatch(r"/tmp/tmp\.[A-Za-z0-9]{10}", file_path)
    assert re.fullmatch(r"/tmp/tmp\.[A-Za-z0-9]{10}", folder_path)
    assert file_path != folder_path
    assert (file_mode, folder_mode) == ("600 regular empty file", "700 directory")


async def test_mktemp_templates_and_folders(sandbox: Sandbox) -> None:
    # bash -c 'mktemp foo.XXXXXX; mktemp -p . bar.XXX; mktemp -t baz.XXXXXX; mktemp foo.XXX.txt;
    #   mktemp -d -p . dir.XXXXXX' printed "foo.9ixjmN", "./bar.L4A", "/tmp/baz.RygbDM",
    #   "foo.xmf.txt", "./dir.olGXRd"
    result = await sh(
        sandbox,
        "mktemp foo.XXXXXX; mktemp -p . bar.XXX; mktemp -t baz.XXXXXX; mktemp foo.XXX.txt; "
        "d=$(mktemp -d -p . dir.XXXXXX); echo $d; [ -d $d ] && echo folder",
    )
    lines = result.stdout.splitlines()
    patterns = [
        r"foo\.[A-Za-z0-9]{6}",
        r"\./bar\.[A-Za-z0-9]{3}",
        r"/tmp/baz\.[A-Za-z0-9]{6}",
        r"foo\.[A-Za-z0-9]{3}\.txt",
        r"\./dir\.[A-Za-z0-9]{6}",
        "folder",
    ]
    assert len(lines) == len(patterns), result.stderr
    for line, pattern in zip(lines, patterns, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)


async def test_mktemp_errors_as_coreutils_does(sandbox: Sandbox) -> None:
    # bash -c 'mktemp ab; mktemp -p nosuch; mktemp -t a/bXXX; echo $?'
    result = await sh(sandbox, "mktemp ab; mktemp -p nosuch; mktemp -t a/bXXX; echo $?")
    assert result.stdout == "1\n"
    assert result.stderr == (
        "mktemp: too few X's in template 'ab'\n"
        "mktemp: failed to create file via template 'nosuch/tmp.XXXXXXXXXX': No such file or "
        "directory\n"
        "mktemp: invalid template, 'a/bXXX', contains directory separator\n"
    )


# -- /dev/null and /dev/zero --------------------------------------------------------------------------


async def test_dev_zero_gives_zero_bytes_to_head(sandbox: Sandbox) -> None:
    # bash -c 'head -c 4 /dev/zero | od -An -tx1'
    assert (await sh(sandbox, "head -c 4 /dev/zero | od -An -tx1")).stdout == " 00 00 00 00\n"


async def test_dev_null_reads_empty_and_swallows_writes(sandbox: Sandbox) -> None:
    # bash -c 'cat /dev/null; echo y | tee /dev/null; cp /dev/null e; wc -c /dev/null; wc -c e;
    #   [ -e /dev/null ] && echo exists'
    result = await sh(
        sandbox,
        "cat /dev/null; echo y | tee /dev/null; cp /dev/null e; wc -c /dev/null; wc -c e; "
        "[ -e /dev/null ] && echo exists",
    )
    assert result.stdout == "y\n0 /dev/null\n0 e\nexists\n", result.stderr


async def test_dev_lists_its_character_devices(sandbox: Sandbox) -> None:
    # bash -c "ls -l /dev/null /dev/zero | awk '{print \$1, \$2, \$3, \$4, \$5, \$6, \$NF}'"
    # printed "crw-rw-rw- 1 root root 1, 3 /dev/null" and "... 1, 5 /dev/zero" (nobody owns the
    # host's /dev/null; root owns it in a container)
    result = await sh(
        sandbox,
        "ls -l /dev/null /dev/zero | awk '{print $1, $2, $3, $4, $5, $6, $NF}'; "
        "stat -c %F /dev/null",
    )
    assert result.stdout == (
        "crw-rw-rw- 1 root root 1, 3 /dev/null\n"
        "crw-rw-rw- 1 root root 1, 5 /dev/zero\n"
        "character special file\n"
    )


async def test_reading_all_of_dev_zero_fails_with_a_reason(sandbox: Sandbox) -> None:
    result = await sh(sandbox, "cat /dev/zero")
    assert result.exit_code != 0
    assert "/dev/zero has no end" in result.stderr
    assert "head -c N /dev/zero" in result.stderr


async def test_dev_null_cannot_be_removed(sandbox: Sandbox) -> None:
    # bash -c 'rm /dev/null' as a user that is not root
    result = await sh(sandbox, "rm /dev/null; echo $?; [ -e /dev/null ] && echo kept")
    assert result.stdout == "1\nkept\n"
    assert "Permission denied" in result.stderr


# -- date -----------------------------------------------------------------------------------------


DATE_CASES: list[tuple[str, str]] = [
    # Each line: bash -c '<command>' on the host (TZ unset: UTC)
    ("date -d @0", "Thu Jan  1 00:00:00 UTC 1970"),
    ("date -u -d @0", "Thu Jan  1 00:00:00 UTC 1970"),
    ("date -d 2024-01-15", "Mon Jan 15 00:00:00 UTC 2024"),
    ("date -d '2024-01-15 10:30:00'", "Mon Jan 15 10:30:00 UTC 2024"),
    ("date -d 2024-01-15T10:30:00Z", "Mon Jan 15 10:30:00 UTC 2024"),
    ("date -d 2024-01-15T10:30:00+02:00", "Mon Jan 15 08:30:00 UTC 2024"),
    ("date -d '2024-01-15 10:30:00 +0530'", "Mon Jan 15 05:00:00 UTC 2024"),
    ("date -d '2024-01-15 +1 day'", "Tue Jan 16 00:00:00 UTC 2024"),
    ("date -d '2024-01-31 + 1 month'", "Sat Mar  2 00:00:00 UTC 2024"),
    ("date -d '2024-01-15 10:30 2 hours ago'", "Mon Jan 15 08:30:00 UTC 2024"),
    ("date -d 'Jan 15 2024'", "Mon Jan 15 00:00:00 UTC 2024"),
    ("date -d '15 Jan 2024 10:00'", "Mon Jan 15 10:00:00 UTC 2024"),
    ("date -d 01/15/2024", "Mon Jan 15 00:00:00 UTC 2024"),
    ("date -d @1.5 +%s.%N", "1.500000000"),
    ("date -I -d @0", "1970-01-01"),
    ("date -Iseconds -d @0", "1970-01-01T00:00:00+00:00"),
    ("date -R -d @0", "Thu, 01 Jan 1970 00:00:00 +0000"),
    ("date --rfc-3339=seconds -d @0", "1970-01-01 00:00:00+00:00"),
    (
        "date -u -d 2024-01-15T10:30:00+02:00 '+%F %T %z %Z'",
        "2024-01-15 08:30:00 +0000 UTC",
    ),
    (
        "date -d @1705314600 '+%a %A %b %B %c|%C|%d|%D|%e|%F|%g|%G|%h|%H|%I|%j|%k|%l|%m|%M|"
        "%N|%p|%P|%r|%R|%s|%S|%T|%u|%U|%V|%w|%W|%x|%X|%y|%Y|%z|%:z|%::z|%Z|%%|%-d|%_m|%05d|"
        "%^a|%#b|%10Y'",
        "Mon Monday Jan January Mon Jan 15 10:30:00 2024|20|15|01/15/24|15|2024-01-15|24|"
        "2024|Jan|10|10|015|10|10|01|30|000000000|AM|am|10:30:00 AM|10:30|1705314600|00|"
        "10:30:00|1|02|03|1|03|01/15/24|10:30:00|24|2024|+0000|+00:00|+00:00:00|UTC|%|15| 1|"
        "00015|MON|JAN|0000002024",
    ),
]


async def test_date_reads_and_formats_as_gnu_date(sandbox: Sandbox) -> None:
    cases = [(command, expected + "\n") for command, expected in DATE_CASES]
    assert await differences(sandbox, cases) == {}


TZ_CASES: list[tuple[str, str]] = [
    # bash -c 'TZ=JST-9 date -d @0'
    ("TZ=JST-9 date -d @0", "Thu Jan  1 09:00:00 JST 1970"),
    # bash -c 'TZ=EST5EDT date -d @1720000000'  (daylight saving time in July)
    ("TZ=EST5EDT date -d @1720000000", "Wed Jul  3 05:46:40 EDT 2024"),
    # bash -c 'TZ=EST5EDT date -d "2024-07-01 12:00" +%s'  (a local time read in the zone)
    ("TZ=EST5EDT date -d '2024-07-01 12:00' +%s", "1719849600"),
    # bash -c 'TZ=UTC-5:30 date -d @0 +"%H:%M %Z %z"'
    ("TZ=UTC-5:30 date -d @0 +'%H:%M %Z %z'", "05:30 UTC +0530"),
]


async def test_date_honours_tz(sandbox: Sandbox) -> None:
    cases = [(command, expected + "\n") for command, expected in TZ_CASES]
    assert await differences(sandbox, cases) == {}


async def test_date_reads_a_zone_file_from_the_sandbox(sandbox: Sandbox) -> None:
    # A TZif file without transitions whose rule is "JST-9" (as /usr/share/zoneinfo/Asia/Tokyo
    # ends), planted in the sandbox. bash -c 'TZ=Asia/Tokyo date -d @0; touch -d @0 f;
    # TZ=Asia/Tokyo ls -l --full-time f | awk "{print \$6, \$7, \$8}"' printed these two lines.
    header = b"TZif2" + bytes(15) + struct.pack(">6l", 0, 0, 0, 0, 1, 4)
    body = struct.pack(">lBB", 0, 0, 0) + b"UTC\0"
    zone = header + body + header + body + b"\nJST-9\n"
    await sandbox.write_file("/usr/share/zoneinfo/Test/Tokyo", zone)
    result = await sh(
        sandbox,
        "TZ=Test/Tokyo date -d @0; touch -d @0 f; "
        "TZ=Test/Tokyo ls -l --full-time f | awk '{print $6, $7, $8}'",
    )
    assert result.stdout == "Thu Jan  1 09:00:00 JST 1970\n1970-01-01 09:00:00.000000000 +0900\n"


async def test_date_without_d_prints_now(sandbox: Sandbox) -> None:
    # bash -c 'date' prints e.g. "Mon Jan 15 10:30:00 UTC 2024" (a one-digit day padded by a space)
    before = int(time.time())
    result = await sh(sandbox, "date; date +%s")
    line, seconds = result.stdout.splitlines()
    assert re.fullmatch(r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ 1-3]\d \d\d:\d\d:\d\d UTC \d{4}", line)
    assert before <= int(seconds) <= time.time()


async def test_date_refuses_what_it_cannot_read_and_says_what_it_reads(sandbox: Sandbox) -> None:
    # bash -c 'date -d garbage; echo $?; date -ud 2024-02-30; echo $?' printed "date: invalid date
    # 'garbage'" and "date: invalid date '2024-02-30'", exit 1 each; the in-memory shell adds a line
    result = await sh(sandbox, "date -d garbage; echo $?; date -ud 2024-02-30; echo $?")
    assert result.stdout == "1\n1\n"
    lines = result.stderr.splitlines()
    assert lines[0] == "date: invalid date 'garbage'"
    assert lines[2] == "date: invalid date '2024-02-30'"
    assert "in-memory" in lines[1]


# -- paste ------------------------------------------------------------------------------------------


PASTE_CASES: list[tuple[str, str]] = [
    # Each: bash -c 'printf "a\nb\nc\n" > f; printf "1\n2\n" > g; <command>'
    ("printf 'a\\nb\\n' | paste -s -d,", "a,b\n"),
    ("paste -s f g", "a\tb\tc\n1\t2\n"),
    ("paste -s -d ':,' f", "a:b,c\n"),
    ("paste f g", "a\t1\nb\t2\nc\t\n"),
    ("paste -d, f g", "a,1\nb,2\nc,\n"),
    ("paste - - < f", "a\tb\nc\t\n"),
    ("printf 'x\\ny' | paste -s", "x\ty\n"),
    ("paste -sd '' f", "abc\n"),
    ("printf 'a\\n\\nb\\n' | paste -sd,", "a,,b\n"),
    ("printf 'a\\nb\\nc\\nd\\ne\\n' | paste -d ',;' - - -", "a,b;c\nd,e;\n"),
]


async def test_paste_as_coreutils(sandbox: Sandbox) -> None:
    prefix = "printf 'a\\nb\\nc\\n' > f; printf '1\\n2\\n' > g; "
    assert await differences(sandbox, PASTE_CASES, prefix=prefix) == {}


# -- xargs ----------------------------------------------------------------------------------------


XARGS_CASES: list[tuple[str, str]] = [
    # Each: bash -c '<command>'
    ("echo a b c | xargs -n1", "a\nb\nc\n"),
    ("echo a b c d e | xargs -n 2", "a b\nc d\ne\n"),
    ("echo a b c | xargs -n2 echo x", "x a b\nx c\n"),
    ("printf 'a b\\nc\\n' | xargs -I {} echo '[{}]'", "[a b]\n[c]\n"),
    ("printf '  lead\\n' | xargs -I{} echo '[{}]'", "[lead]\n"),
    ("printf 'a b\\0c\\0' | xargs -0 -n1 echo", "a b\nc\n"),
    ("printf '\"a b\" c\\\\ d e\\n' | xargs -n1", "a b\nc d\ne\n"),
    ("printf 'a\\nb\\n' | xargs -L1 echo x", "x a\nx b\n"),
    ("printf 'x\\ny\\n' | xargs -i echo '<{}>'", "<x>\n<y>\n"),
    ("echo | xargs echo y", "y\n"),
    ("echo | xargs -r echo y", ""),
    ("printf 'a,b,c' | xargs -d, -n1 echo", "a\nb\nc\n"),
    ("printf 'a b\\nc d\\ne\\n' | xargs -L 2", "a b c d\ne\n"),
    ("printf 'a\\nSTOP\\nb\\n' | xargs -E STOP echo", "a\n"),
]


async def test_xargs_splits_its_input_as_gnu_xargs(sandbox: Sandbox) -> None:
    assert await differences(sandbox, XARGS_CASES) == {}


async def test_xargs_exit_codes_and_errors(sandbox: Sandbox) -> None:
    # bash -c 'echo a | xargs false; echo $?; echo a | xargs nosuchcmd; echo $?;
    #   echo "a'"'"'b" | xargs echo; echo $?; echo a | xargs -n 0 echo; echo $?'
    result = await sh(
        sandbox,
        "echo a | xargs false; echo $?; echo a | xargs nosuchcmd; echo $?; "
        'echo "a\'b" | xargs echo; echo $?; echo a | xargs -n 0 echo; echo $?',
    )
    assert result.stdout == "123\n127\n1\n1\n"
    assert result.stderr == (
        "xargs: nosuchcmd: No such file or directory\n"
        "xargs: unmatched single quote; by default quotes are special to xargs unless you use "
        "the -0 option\n"
        "xargs: value 0 for -n option should be >= 1\n"
        "Try 'xargs --help' for more information.\n"
    )


# -- a missing program fails loudly ---------------------------------------------------------------


async def test_a_missing_program_fails_naming_the_in_memory_sandbox(sandbox: Sandbox) -> None:
    # bash -c 'python3x --version' printed "bash: line 1: python3x: command not found", exit 127
    for program in ("python3", "git", "node", "make", "curl"):
        result = await sh(sandbox, f"{program} --version")
        assert result.exit_code == 127
        assert result.stderr == (
            f"bash: {program}: command not found (the in-memory sandbox has no {program}; use "
            'provider = "docker", or run it where real programs exist)\n'
        )
    # bash -c 'command -v python3x; echo $?; which python3x; echo $?; type python3x 2>/dev/null;
    #   echo $?' printed nothing but the three statuses: looking a program up stays quiet
    result = await sh(
        sandbox,
        "command -v python3; echo $?; which python3; echo $?; type python3 2>/dev/null; echo $?",
    )
    assert result.stdout == "1\n1\n1\n"


async def test_a_missing_script_path_is_no_such_file(sandbox: Sandbox) -> None:
    # bash -c './nope; echo $?' printed "bash: line 1: ./nope: No such file or directory", 127
    result = await sh(sandbox, "./nope; echo $?")
    assert result.stdout == "127\n"
    assert result.stderr == "bash: ./nope: No such file or directory\n"
