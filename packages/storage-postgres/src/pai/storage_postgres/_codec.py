"""How strings and messages are kept in PostgreSQL: exactly, for every Python ``str``.

PostgreSQL's ``text`` and ``jsonb`` cannot hold a NUL character, and no UTF-8 database can hold
a lone surrogate (``"\\ud800"``), yet thread ids, scope keys and message text may contain both.
So every string column is ``bytea`` holding the string's UTF-8 bytes, with lone surrogates
written as ``surrogatepass`` does. That map is injective (decoding reverses it exactly), so
distinct strings stay distinct, and ``bytea`` compares and indexes bytewise, so ids stay
indexable. A message is stored as its JSON (``dump_json``) in a ``bytea``; one holding a lone
surrogate, which pydantic refuses to write as JSON, is written by Python's :mod:`json` with the
surrogates kept, as ``surrogatepass`` bytes, and read back the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from pai.core import message_adapter
from pai.core.ext import decode_message as stored_message
from pai.core.ext import encode_message as stored_form

if TYPE_CHECKING:
    from pai.core import Message

__all__ = ["decode_message", "decode_text", "encode_message", "encode_text"]


def encode_text(value: str) -> bytes:
    """The bytes a string column holds for ``value``.

    Example::

        encode_text("t\\x00\\ud800") == b"t\\x00\\xed\\xa0\\x80"
    """
    return value.encode("utf-8", "surrogatepass")


def decode_text(raw: bytes | bytearray | memoryview) -> str:
    """The string :func:`encode_text` stored as ``raw``."""
    return bytes(raw).decode("utf-8", "surrogatepass")


def encode_message(message: Message) -> bytes:
    """The stored bytes of ``message``: its JSON, UTF-8 (lone surrogates kept, as core's
    :func:`pai.core.ext.encode_message` writes them). Raises ``PydanticSerializationError`` (a
    :class:`ValueError`) for a message that is not JSON at all.

    Example::

        encode_message(UserMessage(content="hi")) == b'{"role":"user","content":"hi"}'
    """
    try:
        data = message_adapter.dump_json(message)
    except PydanticSerializationError:
        data = None
    if data is None or "\ufffd".encode() in data:
        # Not JSON to pydantic (a lone surrogate), or maybe a lone surrogate in a dict key,
        # which pydantic writes as U+FFFD: core's codec keeps it (and raises again when the
        # message is not JSON at all).
        stored = stored_form(message)
        return stored.encode() if isinstance(stored, str) else stored
    return data


def decode_message(raw: bytes) -> Message:
    """The message :func:`encode_message` stored as ``raw``; a :class:`ValueError` when ``raw``
    is not such a message."""
    try:
        return message_adapter.validate_json(raw)
    except ValidationError:
        try:
            raw.decode()
        except UnicodeDecodeError:
            return stored_message(bytes(raw))  # lone surrogates: core's codec reads them back
        raise
