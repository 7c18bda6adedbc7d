"""``pai chat``: the command (the chat loop itself is :mod:`pai.core._chat`)."""

from __future__ import annotations

import click


@click.command("chat")
@click.argument("agent", required=False, metavar="MODULE:AGENT")
@click.option(
    "--model",
    "model_name",
    metavar="PROVIDER:NAME",
    help="Run the agent on this model (e.g. openai:gpt-4.1-mini) instead of its own or [model].",
)
@click.option(
    "--thread",
    "thread_id",
    metavar="ID",
    help='Go on with a stored thread (needs [storage], e.g. url = "sqlite:///threads.db").',
)
def chat_command(agent: str | None, model_name: str | None, thread_id: str | None) -> None:
    """Talk to your agent in the terminal: pai chat myapp.agents:coder

    Without MODULE:AGENT, chats with the agent the configuration names: agent =
    "myapp.agents:coder" in [chat] of pai.toml (or [tool.pai.chat] of pyproject.toml, or
    PAI_CHAT__AGENT). Each line is a message; the answer streams as it comes, with every tool call and result.
    The model, capabilities (the sandbox among them) and storage come from the configuration.
    Ctrl-C cancels the answer in progress and keeps the thread; Ctrl-C at the prompt or end of
    input (Ctrl-D) ends the chat. The thread's id is printed, to come back with --thread.
    """
    import anyio

    from pai.core._assembly import create_agent_runtime
    from pai.core._chat import chat, chat_agent_from_config, load_agent, no_agent_message
    from pai.core._model import aclose_if_closable
    from pai.core._model_config import resolve_model
    from pai.core._plugins import get_plugins
    from pai.core.cli import fail, load_checked_config, note, stdin_is_terminal

    config = load_checked_config()
    configured = chat_agent_from_config(config)  # checks [chat] even when an argument wins
    if agent is not None:
        target = load_agent(agent)
    elif configured is not None:
        name, source, folder = configured
        target = load_agent(name, configured_in=source, folder=folder)
    else:
        fail(no_agent_message(config))
    plugins = get_plugins()
    if thread_id is not None and config.data.get("storage") is None:
        fail(
            f"--thread {thread_id} goes on with a stored thread, but no storage is configured "
            "(threads live in process memory and end with each chat); add to pai.toml:\n\n"
            '    [storage]\n    url = "sqlite:///threads.db"\n\nthen start a chat, and resume '
            "it with --thread"
        )

    async def run() -> None:
        model = resolve_model(model_name, config=config, plugins=plugins) if model_name else None
        try:
            runtime = create_agent_runtime(
                agent=target,
                scope_key=lambda _identity: "cli",
                model=model,
                config=config,
                plugins=plugins,
            )
            async with runtime:
                if runtime.agent.model is None:
                    fail(
                        f"agent {runtime.agent.name!r} has no model; pass --model openai:NAME, "
                        'or configure one in pai.toml: [model] provider = "openai", '
                        'name = "gpt-4.1-mini"'
                    )
                admin = runtime.admin(identity=None)
                if thread_id is not None:
                    thread = admin.thread(thread_id)
                    await thread.record()
                    note(f"going on with thread {thread_id}")
                else:
                    thread = await admin.create_thread()
                    note(f"thread {thread.id} (come back to it with --thread {thread.id})")
                await chat(thread, prompt=stdin_is_terminal())
        finally:
            await aclose_if_closable(model)

    anyio.run(run)
