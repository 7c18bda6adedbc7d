"""PAI quickstart: a capability declared by a tool, bound at the runtime, scoped per thread.

Run it with:  uv run python examples/quickstart.py

The model here is a *scripted* stand-in (pai.core.testing.ScriptedModel): it replays fixed answers
so the example runs offline and deterministically. Swap in a real Model adapter for a real agent.
"""

from __future__ import annotations

import anyio
from pydantic import BaseModel

from pai.core import (
    AcquireInput,
    CapabilityBinding,
    DisposeInput,
    create_agent_runtime,
    create_capability_binding,
    define_agent,
    define_capability,
    define_command,
    define_tool,
)
from pai.core.testing import ScriptedModel, text, tool_call


# 1. A capability: a token with the facade type operations receive.
class Notebook:
    """A per-conversation notebook. Lazy: nothing exists until the first note is written."""

    def __init__(self, key: str, pages: dict[str, list[str]]) -> None:
        self._key, self._pages = key, pages

    def write(self, note: str) -> int:
        page = self._pages.setdefault(self._key, [])
        page.append(note)
        return len(page)

    def read(self) -> list[str]:
        return list(self._pages.get(self._key, []))


notebook = define_capability(Notebook, id="notebook", description="Notes kept per conversation.")


# 2. Operations declare the capability; the facade arrives at ctx.capabilities.
class WriteNote(BaseModel):
    note: str


write_note = define_tool(
    id="writeNote",
    description="Write a note into this conversation's notebook.",
    input_schema=WriteNote,
    capabilities={"notebook": notebook},
    execute=lambda ctx: {"notes": ctx.capabilities[notebook].write(ctx.input.note)},
)


class NoInput(BaseModel):
    pass


read_notes = define_command(
    input=NoInput,
    capabilities={"notebook": notebook},
    run=lambda ctx: ctx.capabilities.notebook.read(),
)

# 3. The agent infers its requirements from its operations.
agent = define_agent(
    name="note-taker",
    instructions="Take notes when asked.",
    tools={"writeNote": write_note},
    commands={"read_notes": read_notes},
    model=ScriptedModel(
        [
            tool_call("writeNote", {"note": "buy milk"}),
            text("Noted: buy milk."),
            tool_call("writeNote", {"note": "call Ada"}),
            text("Noted: call Ada."),
        ]
    ),
)


# 4. The runtime binds the capability: an implementation, a scope, and lifecycle hooks.
def notebook_binding() -> tuple[CapabilityBinding[Notebook], dict[str, list[str]]]:
    pages: dict[str, list[str]] = {}

    def acquire(input: AcquireInput) -> Notebook:
        return Notebook(input.key, pages)

    def dispose(input: DisposeInput) -> None:
        print(f"  [runtime] disposing notebook {input.key} ({input.reason})")
        pages.pop(input.key, None)

    binding = create_capability_binding(
        capability=notebook, scope="thread", acquire=acquire, dispose=dispose
    )
    return binding, pages


async def main() -> None:
    binding, pages = notebook_binding()
    runtime = create_agent_runtime(
        agent=agent,
        scope_key=lambda identity: identity["workspace"],
        capabilities={"notebook": binding},
    )
    async with runtime:
        admin = runtime.admin(identity={"workspace": "acme"})
        for request in ("Remember to buy milk.", "Remember to call Ada."):
            thread = await admin.create_thread()
            print(f"thread {thread.id[:8]}")
            print(f"  user: {request}")
            result = await thread.send(request)
            for message in result.messages[1:]:
                if message.role == "assistant" and message.tool_calls:
                    for call in message.tool_calls:
                        print(f"  tool call: {call.name}({dict(call.arguments)})")
                elif message.role == "tool":
                    print(f"  tool result: {message.content}")
                elif message.role == "assistant":
                    print(f"  agent: {message.content}")
            notes = await thread.commands.read_notes({})
            print(f"  command read_notes -> {notes}")
        print(f"notebooks alive: {len(pages)} (one per thread)")
        await thread.delete()
        print(f"notebooks alive after deleting the last thread: {len(pages)}")


if __name__ == "__main__":
    anyio.run(main)
