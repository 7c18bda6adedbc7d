"""``python -m pai.model_openai.testing``: the OpenAI-compatible test server as a process of its
own, for trying a program (``pai chat`` among them) against scripted answers, with no API key::

    python -m pai.model_openai.testing --script answers.json [--requests requests.json]

It prints its base URL (``http://127.0.0.1:PORT/v1``, a free port of 127.0.0.1 and only there)
as the first line of standard output once it accepts requests, and serves until Ctrl-C or
SIGTERM; then ``--requests`` gets every chat request received, as JSON (path and body, never the
headers: they hold the client's API key). The script is a JSON list of answers, served in order::

    [
      {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo hi"}}]},
      {"text": "The command printed hi."},
      {"error": 429, "message": "slow down", "retry_after": 1}
    ]

``text`` is a string, or a list of strings (the chunks of a streamed answer); ``tool_calls``
may carry a ``text`` too. A request past the end of the script is answered with HTTP 400 saying
so.
"""

from __future__ import annotations

import argparse
import difflib
import json
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn

from pydantic import JsonValue

from pai.model_openai.testing import (
    FunctionCall,
    OpenAITestServer,
    ScriptedAnswer,
    error_answer,
    function_call,
    text_answer,
    tool_calls_answer,
)

_KINDS = ("text", "tool_calls", "error")
_KEYS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "tool_calls": ("tool_calls", "text"),
    "error": ("error", "message", "retry_after"),
}
_CALL_KEYS = ("name", "arguments", "id")
_SHAPES = (
    'an answer is {"text": "..."}, {"tool_calls": [{"name": "...", "arguments": {...}}]} '
    'or {"error": STATUS}'
)


class ScriptError(ValueError):
    """A script file the test server cannot serve; the message names the file, the answer and
    the fix."""


def _suggest(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unknown_keys(where: str, given: Mapping[str, JsonValue], allowed: Sequence[str]) -> None:
    for key in given:
        if key not in allowed:
            raise ScriptError(
                f"{where}: unknown key {key!r}{_suggest(key, allowed)}; "
                f"valid here: {', '.join(allowed)}"
            )


def _text(where: str, value: JsonValue) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(piece, str) for piece in value):
        return tuple(piece for piece in value if isinstance(piece, str))
    raise ScriptError(
        f"{where}: text must be a string or a non-empty list of strings, got {json.dumps(value)}"
    )


def _answer(where: str, raw: JsonValue) -> ScriptedAnswer:
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: expected an object, got {json.dumps(raw)}; {_SHAPES}")
    kinds = [kind for kind in ("tool_calls", "error") if kind in raw] or (
        ["text"] if "text" in raw else []
    )
    if len(kinds) != 1:
        keys = ", ".join(repr(key) for key in raw) or "no key"
        hint = next((h for key in raw if key not in _KINDS and (h := _suggest(key, _KINDS))), "")
        raise ScriptError(f"{where}: cannot tell the answer's kind from {keys}{hint}; {_SHAPES}")
    kind = kinds[0]
    _unknown_keys(where, raw, _KEYS[kind])
    if kind == "text":
        return text_answer(*_text(where, raw["text"]))
    if kind == "error":
        status, message, retry_after = raw["error"], raw.get("message"), raw.get("retry_after")
        if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
            raise ScriptError(
                f"{where}: error must be an HTTP status from 400 to 599, got {status!r}"
            )
        if message is not None and not isinstance(message, str):
            raise ScriptError(f"{where}: message must be a string, got {json.dumps(message)}")
        if retry_after is not None and (
            isinstance(retry_after, bool)
            or not isinstance(retry_after, int | float)
            or retry_after < 0
        ):
            raise ScriptError(
                f"{where}: retry_after must be a number of seconds (0 or more), "
                f"got {json.dumps(retry_after)}"
            )
        return error_answer(
            status, message, retry_after=None if retry_after is None else float(retry_after)
        )
    calls = raw["tool_calls"]
    if not isinstance(calls, list) or not calls:
        raise ScriptError(
            f"{where}: tool_calls must be a non-empty list of "
            f'{{"name": ..., "arguments": {{...}}}}, got {json.dumps(calls)}'
        )
    made: list[FunctionCall] = []
    for number, call in enumerate(calls, 1):
        at = f"{where}, tool call {number}"
        if not isinstance(call, dict):
            raise ScriptError(f'{at}: expected {{"name": ..., "arguments": {{...}}}}')
        _unknown_keys(at, call, _CALL_KEYS)
        name, arguments, call_id = call.get("name"), call.get("arguments", {}), call.get("id")
        if not isinstance(name, str) or not name:
            raise ScriptError(f"{at}: name must be the tool's name, a non-empty string")
        if not isinstance(arguments, dict | str):
            raise ScriptError(
                f"{at}: arguments must be an object (or a string, sent verbatim), "
                f"got {json.dumps(arguments)}"
            )
        if call_id is not None and not isinstance(call_id, str):
            raise ScriptError(f"{at}: id must be a string, got {json.dumps(call_id)}")
        made.append(function_call(name, arguments, id=call_id))
    text = raw.get("text")
    return tool_calls_answer(*made, text=None if text is None else "".join(_text(where, text)))


def load_script(path: Path) -> list[ScriptedAnswer]:
    """The answers of a script file, or :class:`ScriptError` naming what is wrong where."""
    try:
        raw: JsonValue = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ScriptError(f"{path}: cannot read the script ({error.strerror or error})") from None
    except UnicodeDecodeError:
        raise ScriptError(f"{path}: the script is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise ScriptError(
            f"{path}, line {error.lineno} column {error.colno}: not JSON ({error.msg})"
        ) from None
    if not isinstance(raw, list):
        raise ScriptError(f"{path}: the script must be a JSON list of answers; {_SHAPES}")
    return [
        _answer(f"{path}, answer {number} of {len(raw)}", item)
        for number, item in enumerate(raw, 1)
    ]


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pai.model_openai.testing",
        description="Serve scripted OpenAI Chat Completions answers on 127.0.0.1; the first "
        "line printed is the base URL.",
    )
    parser.add_argument(
        "--script", type=Path, required=True, help="a JSON list of answers, served in order"
    )
    parser.add_argument(
        "--requests",
        type=Path,
        help="write every chat request received here, as JSON, when the server stops",
    )
    options = parser.parse_args(argv)
    try:
        answers = load_script(options.script)
    except ScriptError as error:
        _fail(str(error))
    if options.requests is not None and not options.requests.parent.is_dir():
        _fail(f"--requests {options.requests}: the folder {options.requests.parent} does not exist")

    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    with OpenAITestServer(answers) as server:
        print(server.base_url, flush=True)
        print(
            f"serving {len(answers)} scripted answers at {server.base_url}; Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.2):
            pass
        received = server.requests
        left = server.remaining
    if options.requests is not None:
        recorded = [{"method": r.method, "path": r.path, "body": r.body} for r in received]
        options.requests.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")
    print(
        f"served {len(received)} requests; {left} scripted answers left unused",
        file=sys.stderr,
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
