"""``pai chat``: the command (the chat loop itself is :mod:`pai.core._chat`)."""

from __future__ import annotations

import click


@click.command("chat")
@click.argument("agent", required=False, metavar="MODULE:AGENT")
@click.option(
    "-p",
    "--prompt",
    "prompt_text",
    metavar="MESSAGE",
    help="Send this one message, print the answer and exit (1 when the answer failed); stdin "
    "is not read.",
)
@click.option(
    "-m",
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
@click.option(
    "--continue",
    "latest",
    is_flag=True,
    help="Go on with the latest thread of the agent in the scope (needs [storage]).",
)
@click.option("--agent", "agent_id", metavar="NAME", help="The agent of an app with several.")
@click.option(
    "--scope",
    metavar="KEY",
    help="The scope key of the threads (default: cli); a thread of another scope needs it.",
)
@click.option(
    "--identity",
    metavar="VALUE",
    help="The identity an app's scope_key makes the scope key of (JSON, or text).",
)
def chat_command(
    agent: str | None,
    prompt_text: str | None,
    model_name: str | None,
    thread_id: str | None,
    latest: bool,
    agent_id: str | None,
    scope: str | None,
    identity: str | None,
) -> None:
    """Talk to your agent in the terminal: pai chat myapp.agents:coder

    Without MODULE:AGENT, chats with the agent the configuration names: agent =
    "myapp.agents:coder" in [chat] of pai.toml (or [tool.pai.chat] of pyproject.toml, or
    PAI_CHAT__AGENT). Each line is a message; the answer streams as it comes, with every tool call and result.
    The model, capabilities (the sandbox among them) and storage come from the configuration.
    Ctrl-C cancels the answer in progress and keeps the thread; Ctrl-C at the prompt or end of
    input (Ctrl-D) ends the chat. The thread's id is printed, to come back with --thread.

    -p "question" sends one message, prints the answer and exits. Piped input or -p stops at
    the first failed answer with exit status 1. On a terminal: line editing and history
    ($XDG_STATE_HOME/pai/history), Markdown answers, and the commands /help, /thread, /new,
    /exit.
    """
    import anyio

    from pai.core._chat import ChatOutcome, chat, chat_banner, chat_view
    from pai.core._chat_target import (
        lacks_message,
        no_agent_message,
        open_chat_target,
        parse_identity,
        target_spec,
    )
    from pai.core._cli_threads import chat_thread, say_what_stays
    from pai.core._plugins import get_plugins
    from pai.core.cli import fail, load_checked_config, stdin_is_terminal, stdout_is_terminal

    if prompt_text is not None and not prompt_text.strip():
        fail('-p/--prompt needs a message, e.g. pai chat myapp.agents:coder -p "hello"')
    interactive = prompt_text is None and stdin_is_terminal()
    outcome = ChatOutcome()
    config = load_checked_config()
    spec = target_spec(config, agent)  # checks [chat] even when an argument wins
    if spec is None:
        fail(no_agent_message(config))
    plugins = get_plugins()

    async def run() -> None:
        async with open_chat_target(
            spec,
            config=config,
            plugins=plugins,
            agent_id=agent_id,
            model_name=model_name,
            scope=scope,
            identity=parse_identity(identity),
        ) as target:
            if target.problems:
                fail(lacks_message(target))
            thread = await chat_thread(target, thread_id=thread_id, latest=latest)
            try:
                await chat(
                    thread,
                    interactive=interactive,
                    messages=None if prompt_text is None else [prompt_text],
                    new_thread=target.admin().create_thread,
                    view=chat_view(terminal=stdout_is_terminal()),
                    banner=chat_banner(target.agent, model_name, config, thread.id, interactive),
                    outcome=outcome,
                )
            finally:
                await say_what_stays(target, outcome.thread_id or thread.id)

    anyio.run(run)
    if not interactive and outcome.exit_code():
        click.get_current_context().exit(outcome.exit_code())
