"""How the built-in stores keep strings and messages: exactly, for every Python ``str``.

Instance keys, thread ids and message text may hold any ``str``, lone surrogates included
(``"\\ud800"``), which UTF-8 cannot encode: ``sqlite3`` refuses to bind them, pydantic's
``dump_json`` refuses to write them and its ``validate_json`` refuses to read their ``\\uXXXX``
escapes. So:

- a string UTF-8 can encode is stored as it always was (SQLite ``TEXT``); one that it cannot is
  stored as its ``surrogatepass`` UTF-8 bytes (a ``BLOB``), and a ``BLOB`` read back is decoded
  the same way. The map is injective: those bytes are never valid UTF-8, so no ``TEXT`` value
  equals them, and SQLite never compares a ``BLOB`` equal to a ``TEXT``;
- a message is stored as the JSON ``dump_json`` writes, as text; a message holding a lone
  surrogate is written by Python's :mod:`json` instead (the same document, surrogates kept) and
  stored as ``BLOB`` like any other string UTF-8 cannot encode, then read back with :mod:`json`.

Databases written before this rule hold only ``TEXT`` and read exactly as before.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, cast

from pydantic_core import PydanticSerializationError

from pai.core._messages import message_adapter

if TYPE_CHECKING:
    from pai.core._messages import Message

__all__ = ["decode_message", "encode_message", "from_sql_text", "to_sql_text"]


def to_sql_text(value: str) -> str | bytes:
    """``value`` as SQLite should store it: itself, or the ``surrogatepass`` bytes of a string
    with lone surrogates.

    Example::

        to_sql_text("t1") == "t1"
        to_sql_text("t\\ud800") == b"t\\xed\\xa0\\x80"
    """
    if value.isascii():
        return value
    try:
        value.encode()
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")
    return value


def from_sql_text(value: str | bytes) -> str:
    """The ``str`` :func:`to_sql_text` stored as ``value``.

    Example::

        from_sql_text(to_sql_text("t\\ud800")) == "t\\ud800"
    """
    if type(value) is str:
        return value
    return cast("bytes", value).decode("utf-8", "surrogatepass")


def _jsonable(value: object) -> object:
    """``dump_python`` output as the values ``dump_json`` would write (non-finite floats are
    ``null``, as pydantic writes them by default)."""
    if isinstance(value, dict):
        items = cast("dict[object, object]", value).items()
        return {key: _jsonable(item) for key, item in items}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in cast("list[object] | tuple[object, ...]", value)]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


_REPLACEMENT = "\ufffd".encode()
"""U+FFFD in UTF-8: what pydantic's JSON holds where a dict key had a lone surrogate."""


def _json_keeping_surrogates(message: Message) -> str | None:
    """The JSON of ``message`` with its lone surrogates kept, or ``None`` if it has none (or
    cannot be written as JSON at all)."""
    try:
        text = json.dumps(
            _jsonable(message_adapter.dump_python(message, warnings=False)),
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
        )
    except (PydanticSerializationError, TypeError, ValueError):
        return None
    try:
        text.encode()
    except UnicodeEncodeError:
        return text
    return None  # encodable after all: pydantic refused the message for another reason


def encode_message(message: Message) -> str | bytes:
    """The stored form of ``message``: its JSON text, or, when it holds a lone surrogate, the
    ``surrogatepass`` bytes of that text. Raises ``PydanticSerializationError`` if the message
    cannot be written as JSON (a value that is not JSON, from ``model_construct``).

    Example::

        encode_message(UserMessage(content="hi")) == '{"role":"user","content":"hi"}'
    """
    try:
        data = message_adapter.dump_json(message)
    except PydanticSerializationError:
        text = _json_keeping_surrogates(message)
        if text is None:
            raise
        return text.encode("utf-8", "surrogatepass")
    if _REPLACEMENT in data:
        # pydantic writes a lone surrogate in a dict key as U+FFFD, where it refuses one in a
        # value: the JSON written by Python keeps it (and a real U+FFFD stays one).
        text = _json_keeping_surrogates(message)
        if text is not None:
            return text.encode("utf-8", "surrogatepass")
    return data.decode()


def decode_message(raw: str | bytes) -> Message:
    """The message :func:`encode_message` stored as ``raw``.

    Example::

        decode_message(encode_message(message)) == message
    """
    if type(raw) is str:
        return message_adapter.validate_json(raw)
    text = cast("bytes", raw).decode("utf-8", "surrogatepass")
    return message_adapter.validate_python(json.loads(text))
