"""The message format between the provider (host) and its worker processes.

One message is one frame: an 8-byte header (two big-endian unsigned 32-bit lengths), a JSON
document of plain values (lists, dicts, strings, numbers, booleans, ``None``) and an optional
binary payload. No pickle or marshal: the host never decodes anything but JSON and raw bytes
from a worker, and it checks both lengths against its limits *before* reading them.

Strings may carry lone surrogates (the interpreter's ``surrogateescape`` text for non-UTF-8
bytes); JSON's ``\\udcxx`` escapes carry them both ways unchanged.

Both sides import this module (and :mod:`pai.sandbox_inmemory._confine`): it holds what the host
and the worker must agree on, the frames, the worker's environment, the devices and the exit
codes a command's result carries, so the host never imports the worker's modules.
"""

from __future__ import annotations

import json
import struct

__all__ = [
    "DEVICES",
    "EXIT_INTERPRETER_ERROR",
    "EXIT_OUT_OF_MEMORY",
    "HEADER",
    "MAX_JSON",
    "WORKER_ENVIRONMENT",
    "ProtocolError",
    "decode_body",
    "encode_frame",
    "encode_head",
]

HEADER = struct.Struct("!II")
"""The frame header: the JSON document's length, then the payload's length."""

MAX_JSON = 4 * 1024 * 1024
"""The largest JSON document either side accepts (paths, arguments, directory listings)."""

WORKER_ENVIRONMENT: dict[str, str] = {"TZ": "UTC0", "LC_ALL": "C"}
"""A worker's whole process environment, fixed for its life (it refuses ``os.putenv``): the C
library never looks up a time zone, a locale or a terminal by a name a command chose. A
sandbox's variables (``env``, ``export``) live in the shell interpreter only."""

DEVICES: dict[str, tuple[int, int]] = {"/dev/null": (1, 3), "/dev/zero": (1, 5)}
"""The character devices every instance has (path -> major and minor number, as Linux numbers
them), which the host's filesystem (``HostFs``) keeps and the worker's commands show: writes to
them vanish; ``/dev/null`` reads as empty; ``/dev/zero`` has no end, so a read of the whole file
fails with a message (``head -c N /dev/zero`` reads it)."""

EXIT_INTERPRETER_ERROR = 126
"""Exit code when the interpreter itself stopped the script (a limit hit, an internal error)."""

EXIT_OUT_OF_MEMORY = 137
"""Exit code of a command that ran out of memory (as a container's out-of-memory kill reports).
The worker's shell reports it, and the host when a worker dies under a command."""


class ProtocolError(Exception):
    """A frame that breaks the format (too long, not JSON, wrong shape)."""


def encode_head(document: object, payload_size: int, *, max_json: int = MAX_JSON) -> bytes:
    """A frame without its payload (header and JSON part), for a sender that writes a large
    payload after it without joining the two."""
    body = json.dumps(document, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    if len(body) > max_json:
        raise ProtocolError(f"a message of {len(body)} bytes is over the limit of {max_json}")
    return HEADER.pack(len(body), payload_size) + body


def encode_frame(document: object, payload: bytes = b"", *, max_json: int = MAX_JSON) -> bytes:
    """One frame: ``document`` as JSON (ASCII, surrogates escaped) plus ``payload``.

    ``max_json`` is :data:`MAX_JSON` for what a worker sends; the host answers a worker's file
    request (a listing of a large folder) with up to the memory budget.
    """
    body = json.dumps(document, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    if len(body) > max_json:
        raise ProtocolError(f"a message of {len(body)} bytes is over the limit of {max_json}")
    return HEADER.pack(len(body), len(payload)) + body + payload


def decode_body(body: bytes) -> list[object]:
    """The JSON document of a frame, which must be a non-empty list starting with a string."""
    try:
        document: object = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise ProtocolError(f"a message is not JSON: {error}") from None
    if not isinstance(document, list) or not document or not isinstance(document[0], str):
        raise ProtocolError("a message is not a list starting with its kind")
    return document  # pyright: ignore[reportUnknownVariableType]
