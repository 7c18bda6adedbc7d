"""What the routes need from a UI protocol (AG-UI, the AI SDK's UI message stream): read the
request body into a :class:`RunRequest`, and turn a run's events into the protocol's frames.

A frame is the text of one SSE ``data:`` field (JSON, or the AI SDK's ``[DONE]``). The routes add
the ``id:`` field (the frame's position in the run, from 1) so a client can resume with
``Last-Event-ID``; the protocol never sees ids.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import pydantic

from pai.core import RunEvent, RunResult
from pai.http._errors import BadRequestError


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file part of the user's message: its name, media type and bytes (already size-checked)."""

    filename: str
    media_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What a protocol request asks for: run the agent in ``thread_id`` on ``text``.

    ``run_id`` is the client's id for the run when the protocol has one (AG-UI's ``runId``),
    else ``None`` and the server makes one. ``tool_results`` answers pending external tool calls
    (call id -> output; ``{"approved": true}``, or its JSON text, for a call that needs
    approval) instead of a new message when the protocol sends them.
    """

    thread_id: str
    text: str
    run_id: str | None = None
    tool_results: Mapping[str, object] = field(default_factory=dict[str, object])
    attachments: Sequence[Attachment] = ()


class Encoder(Protocol):
    """Turns one run's events into frames, in order. One encoder per run."""

    def start(self) -> list[str]:
        """The frames that open the run (AG-UI ``RUN_STARTED``; AI SDK ``start``)."""
        ...

    def event(self, event: RunEvent) -> list[str]:
        """The frames for one event of ``thread.stream`` (none for events the protocol has no
        place for)."""
        ...

    def finish(self, result: RunResult) -> list[str]:
        """The frames that close a run that ended (AG-UI ``RUN_FINISHED``; AI SDK ``finish``,
        then ``[DONE]``). Closes any message or tool call left open."""
        ...

    def error(self, message: str, *, code: str) -> list[str]:
        """The frames that close a run that failed or was cancelled (AG-UI ``RUN_ERROR``; AI SDK
        ``error``, then ``[DONE]``). ``message`` is safe to show: no traceback, no host path."""
        ...


class WireProtocol(Protocol):
    """One UI protocol the server speaks."""

    name: str
    """Its name in routes, the OpenAPI document and stored run records: ``"ag-ui"``, ``"ai-sdk"``."""

    headers: Mapping[str, str]
    """Extra response headers of its streams (the AI SDK's ``x-vercel-ai-ui-message-stream``)."""

    def parse(
        self, body: bytes, *, max_message_chars: int, max_attachment_bytes: int
    ) -> RunRequest:
        """The request a body holds; :class:`~pai.http.BadRequestError` (400, or 413 for a message
        or attachment over its limit) naming what is wrong and where (the JSON path)."""
        ...

    def encoder(self, *, thread_id: str, run_id: str) -> Encoder:
        """A new encoder for one run."""
        ...


def validation_problem(error: pydantic.ValidationError, *, most: int = 3) -> str:
    """The first problems of a validation error, each with its JSON path (``messages[2].role``),
    without echoing the input back (a client's body may be large or hold secrets)."""
    problems: list[str] = []
    for detail in error.errors(include_url=False, include_input=False)[:most]:
        path = ""
        for part in detail["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        problems.append(f"{path or 'the body'}: {detail['msg']}")
    more = error.error_count() - len(problems)
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")


def check_message_length(text: str, limit: int) -> str:
    """``text``, or a 413 when it is longer than ``limit`` characters."""
    if len(text) > limit:
        raise BadRequestError(
            f"the message is {len(text):,} characters; at most {limit:,} are accepted "
            "(HttpLimits.max_message_chars)",
            status=413,
            code="message_too_large",
        )
    return text


def decode_base64(payload: str, where: str, max_bytes: int) -> bytes:
    """The bytes of a base64 attachment at ``where`` (a JSON path, for messages): a 413 when
    they are over ``max_bytes`` (refused before decoding what cannot fit), a 422 when it is not
    base64."""
    too_large = BadRequestError(
        f"{where} is larger than {max_bytes:,} bytes (HttpLimits.max_attachment_bytes)",
        status=413,
        code="file_too_large",
    )
    if len(payload) > (max_bytes * 4) // 3 + 4:  # base64 is 4/3 of the bytes
        raise too_large
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequestError(
            f"{where} is not valid base64", status=422, code="invalid_input"
        ) from None
    if len(data) > max_bytes:
        raise too_large
    return data
