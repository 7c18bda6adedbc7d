"""Scopes and instance keys: which operations share one capability instance.

A binding's scope turns an operation's identity into an *instance key*. Built-in scopes serialize
the identity into one opaque key with :func:`instance_key`; a custom scope's string is used verbatim.

The built-in encoding is::

    pai1.<scope tag>.<capability id>[.<part>...]

where each part is the UTF-8 (``surrogatepass``) bytes of one identity string, with every byte
outside ``[a-z0-9-]`` written as ``_`` plus two lowercase hex digits. Parts never contain ``.``,
and the scope kind fixes how many parts follow, so distinct identity tuples never share a key; the
alphabet ``[a-z0-9._-]`` is safe as a Docker label value, an E2B metadata value and a file name
(also on case-insensitive file systems). Compare or persist keys; never parse them.

Keys are at most :data:`MAX_KEY_LENGTH` (200) characters, whatever the identity's length, so they
stay usable as a file name (255 bytes on most file systems) and a label value. A key that would be
longer keeps its first characters, readable, and ends in ``_h`` plus the SHA-256 of the whole
encoding, hex. ``_h`` never occurs in a key within the bound (there every ``_`` starts a
two-hex-digit escape), so a bounded key never equals another key, and two bounded keys are equal
only for equal encodings: the keys stay injective. Keys within the bound are exactly the encoding.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

ScopeKind: TypeAlias = Literal["thread", "rootThread", "user", "scope", "global"]
"""The built-in scopes."""

SCOPE_KINDS: tuple[ScopeKind, ...] = ("thread", "rootThread", "user", "scope", "global")


@dataclass(frozen=True, slots=True)
class CapabilityScopeInput:
    """What a custom scope function receives.

    ``root_thread_id`` is the top-level thread reached by following ``parent_thread_id``; it equals
    ``thread_id`` for a top-level thread. ``identity`` is the app's identity value: narrow it
    yourself.

    Example::

        # One instance per user per top-level conversation, shared with subagents.
        def per_user_conversation(s: CapabilityScopeInput) -> str:
            return json.dumps([s.scope_key, s.user_key, s.root_thread_id])
    """

    thread_id: str
    root_thread_id: str
    scope_key: str
    user_key: str | None
    identity: object


CapabilityScope: TypeAlias = ScopeKind | Callable[[CapabilityScopeInput], str]
"""A built-in scope name, or a function returning the instance key itself."""

# Fixed tags already in the key alphabet, so the kind reads plainly in a key.
_KIND_TAGS: dict[ScopeKind, str] = {
    "thread": "thread",
    "rootThread": "root-thread",
    "user": "user",
    "scope": "scope",
    "global": "global",
}
_KEPT = "abcdefghijklmnopqrstuvwxyz0123456789-"
_ESCAPES = tuple(chr(b) if chr(b) in _KEPT else f"_{b:02x}" for b in range(256))
_PREFIXES: dict[ScopeKind, str] = {kind: f"pai1.{tag}." for kind, tag in _KIND_TAGS.items()}

MAX_KEY_LENGTH = 200
"""The longest instance key a built-in scope derives, in characters (all ASCII)."""
_DIGEST_MARK = "_h"  # never in a key within the bound: there every "_" begins a hex escape
_KEPT_PREFIX = MAX_KEY_LENGTH - len(_DIGEST_MARK) - 64  # 64: a SHA-256 in hex


def encode_key_part(value: str) -> str:
    """Encode one identity string into the key alphabet ``[a-z0-9_-]`` (injective)."""
    # Fast path: a string made only of kept characters is its own encoding. (strip() with the
    # kept set leaves nothing exactly when every character is kept.)
    if not value.strip(_KEPT):
        return value
    return "".join([_ESCAPES[b] for b in value.encode("utf-8", "surrogatepass")])


def instance_key(capability_id: str, kind: ScopeKind, parts: tuple[str, ...]) -> str:
    """The opaque key of a built-in scope.

    ``parts`` depend on the kind: ``(scope_key, thread_id)`` for ``"thread"``,
    ``(scope_key, root_thread_id)`` for ``"rootThread"``, ``(scope_key, user_key)`` for ``"user"``,
    ``(scope_key,)`` for ``"scope"`` and ``()`` for ``"global"``.

    Example::

        >>> instance_key("sandbox", "thread", ("acme", "t-1"))
        'pai1.thread.sandbox.acme.t-1'
    """
    key = _PREFIXES[kind] + encode_key_part(capability_id)
    for part in parts:
        key += "." + encode_key_part(part)
    if len(key) <= MAX_KEY_LENGTH:
        return key
    digest = hashlib.sha256(key.encode("ascii")).hexdigest()
    return key[:_KEPT_PREFIX] + _DIGEST_MARK + digest


def is_scope(value: object) -> bool:
    """Whether ``value`` is a valid :data:`CapabilityScope`."""
    return value in SCOPE_KINDS or callable(value)


def derive_instance_key(
    capability_id: str,
    scope: CapabilityScope,
    *,
    scope_key: str,
    thread_id: str,
    root_thread_id: str | None = None,
    user_key: str | None = None,
    identity: object = None,
) -> str:
    """The instance key an operation in ``thread_id`` gets from a binding with ``scope``.

    The one derivation the runtime uses, public for capability packages whose services acquire
    outside an operation (``pai.sandbox.create_sandbox_service``). ``root_thread_id`` matters for
    ``"rootThread"`` and custom scopes (it defaults to ``thread_id``: right for a top-level
    thread), ``user_key`` for ``"user"``. Raises :class:`~pai.core.CapabilityBindingError`
    (naming the capability) when a key cannot be derived: no user key for ``"user"``, a custom
    scope that raises or returns anything but a non-empty string.

    Example::

        >>> derive_instance_key("sandbox", "thread", scope_key="acme", thread_id="t-1")
        'pai1.thread.sandbox.acme.t-1'
    """
    from pai.core._errors import CapabilityBindingError

    root = root_thread_id if root_thread_id is not None else thread_id
    if callable(scope):
        try:
            raw = scope(CapabilityScopeInput(thread_id, root, scope_key, user_key, identity))
        except Exception as error:
            raise CapabilityBindingError(
                f"the custom scope of capability {capability_id!r} raised {error!r}; a scope "
                "function must return a non-empty string key",
                ids=[capability_id],
            ) from error
        if not isinstance(raw, str) or not raw:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise CapabilityBindingError(
                f"the custom scope of capability {capability_id!r} returned {raw!r}; a scope "
                "function must return a non-empty string key",
                ids=[capability_id],
            )
        return raw
    if scope == "thread":
        return instance_key(capability_id, scope, (scope_key, thread_id))
    if scope == "rootThread":
        return instance_key(capability_id, scope, (scope_key, root))
    if scope == "user":
        if not user_key:
            raise CapabilityBindingError(
                f"capability {capability_id!r} is bound with scope 'user', but no user key could "
                "be derived for this identity; pass create_agent_runtime(user_key=lambda "
                "identity: ...) returning a non-empty string for every identity that uses it",
                ids=[capability_id],
            )
        return instance_key(capability_id, scope, (scope_key, user_key))
    if scope == "scope":
        return instance_key(capability_id, scope, (scope_key,))
    return instance_key(capability_id, scope, ())
