"""Capability tokens: the named, typed requirement an operation declares."""

from __future__ import annotations

import re
from typing import Generic, TypeVar, final

from pai.core._errors import DefinitionError

F = TypeVar("F")
F_co = TypeVar("F_co", covariant=True)

# Bare ids for first-party capabilities ("sandbox"), dotted prefixed ids for third parties
# ("acme.vault"). Kept to a small alphabet so ids read the same in config files, env vars and keys.
_ID_PATTERN = re.compile(r"[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*")


@final
class Capability(Generic[F_co]):
    """A capability token: an id plus the facade type operations will receive.

    Tokens are pure declarations. Create them with :func:`define_capability`; bind them with a
    :class:`~pai.core.CapabilityBinding` at the runtime.
    """

    __slots__ = ("_description", "_facade", "_id")

    def __init__(self, facade: type[F_co], id: str, description: str | None = None) -> None:
        self._facade = facade
        self._id = id
        self._description = description

    @property
    def facade(self) -> type[F_co]:
        """The type operations receive at ``ctx.capabilities[token]``."""
        return self._facade

    @property
    def id(self) -> str:
        """The stable identity: the key in a runtime's ``capabilities=`` record."""
        return self._id

    @property
    def description(self) -> str | None:
        """What the capability provides, for people and listings."""
        return self._description

    def __repr__(self) -> str:
        return f"Capability(id={self.id!r}, facade={_type_name(self.facade)})"


def define_capability(
    facade: type[F], /, *, id: str, description: str | None = None
) -> Capability[F]:
    """Declare a capability token whose operations receive a ``facade`` instance.

    Example::

        class SqlWorkbench(Protocol):
            async def query(self, sql: str) -> list[dict[str, object]]: ...

        db = define_capability(SqlWorkbench, id="db", description="Read-only tenant SQL.")

    Use bare ids (``"sandbox"``) for first-party capabilities and prefixed ids (``"acme.vault"``)
    for third-party ones.
    """
    if not isinstance(facade, type):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise DefinitionError(
            f"define_capability() takes the facade type first, got {facade!r}; "
            "pass the class or Protocol that operations will receive, e.g. "
            "define_capability(Sandbox, id='sandbox')"
        )
    if not isinstance(id, str) or not _ID_PATTERN.fullmatch(id):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise DefinitionError(
            f"capability id {id!r} is not valid; use lowercase letters, digits, '-' and '_', "
            "with '.' between parts, e.g. 'sandbox' or 'acme.vault'"
        )
    return Capability(facade, id, description)


def _type_name(tp: type[object]) -> str:
    return f"{tp.__module__}.{tp.__qualname__}"


def same_facade(required: type[object], bound: type[object]) -> bool:
    """Whether a binding for ``bound`` can serve operations that require ``required``."""
    if bound is required:
        return True
    try:
        return issubclass(bound, required)
    except TypeError:  # non-runtime Protocols refuse issubclass; only identity counts then
        return False


def facade_name(tp: type[object]) -> str:
    """A readable, qualified name of a facade type, for error messages."""
    return _type_name(tp)
