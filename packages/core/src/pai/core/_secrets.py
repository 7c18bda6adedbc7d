"""Keeping secrets out of what PAI prints: configuration listings and error messages.

A value is a secret when its key is named like one (``api_key``, ``token``, ``client_secret``,
``password``, ...), when it is the password of a URL (``postgresql://user:pw@host/db``), or when
it looks like an API key or token by itself (``sk-...``, ``ghp_...``, a JWT, a long run of
mixed letters and digits). Such values are printed as :data:`MASK`.

A key ending in ``_env`` (``api_key_env``) names an environment variable, not a secret, so its
value is shown when it looks like a variable name (``OPENAI_API_KEY``) and masked otherwise.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

MASK = "***"
"""What a secret is printed as."""

_SECRET_KEY = re.compile(
    r"(^|[_.-])(api[_-]?)?(key|keys|token|secret|secrets|password|passwd|passphrase|pwd|"
    r"credentials?|auth|authorization|cookie|private[_-]?key)($|[_.-])|apikey|accesskey|secretkey",
    re.IGNORECASE,
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN_PREFIXES = re.compile(
    r"(?<![A-Za-z0-9])(sk|pk|rk)[-_][A-Za-z0-9_-]{16,}"
    r"|(?<![A-Za-z0-9])(ghp|gho|ghu|ghs|ghr|github_pat|glpat|hf)[-_][A-Za-z0-9_]{20,}"
    r"|(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|(?<![A-Za-z0-9])e2b_[0-9a-f]{20,}"
    r"|(?<![A-Za-z0-9])(AKIA|ASIA)[A-Z0-9]{12,}"
    r"|(?<![A-Za-z0-9])AIza[A-Za-z0-9_-]{20,}"
    r"|(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
)
_URL_USERINFO = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)"
    r"(?P<user>[^:/?#@\s'\"]{0,256}):(?P<pw>[^/?#@\s'\"]{1,1024})@"
)
_LONG_RUN = re.compile(r"[A-Za-z0-9_-]{24,}")
_SHORTEST = 6
"""Shorter values are not worth masking wherever they occur (they would mask words)."""
_SHORTEST_IN_ENVIRONMENT = 8
_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)


def secret_key(name: str) -> bool:
    """Whether a configuration key of this name holds a secret (``api_key``, ``token``, ...).

    ``*_env`` keys (``api_key_env``) name a variable and are not secrets themselves."""
    return not name.lower().endswith("_env") and _SECRET_KEY.search(name) is not None


def env_name_key(name: str) -> bool:
    """Whether a key of this name holds the name of an environment variable (``api_key_env``)."""
    return name.lower().endswith("_env")


def looks_like_env_name(value: str) -> bool:
    """``OPENAI_API_KEY`` does; ``sk-...`` (a key pasted where a variable name belongs) does not."""
    return _ENV_NAME.fullmatch(value) is not None and not looks_like_secret(value)


def looks_like_secret(text: str) -> bool:
    """Whether ``text`` by itself looks like an API key or token: a known prefix (``sk-``,
    ``ghp_``, ``AKIA``, a JWT) or a long run of letters mixed with digits that is not an
    upper-case variable name."""
    if _TOKEN_PREFIXES.search(text):
        return True
    return any(_random_looking(run) for run in _LONG_RUN.findall(text))


def _random_looking(run: str) -> bool:
    """A long run of upper- and lower-case letters and digits together: a key, not a word, a
    variable name, a hex digest or a UUID."""
    return (
        any(ch.isupper() for ch in run)
        and any(ch.islower() for ch in run)
        and sum(ch.isdigit() for ch in run) >= 2
    )


def mask_url(url: str) -> str:
    """``url`` with the password of its user info replaced: ``postgresql://me:***@db/x``."""
    return _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", url)


def mask_value(key: str | None, value: object) -> object:
    """``value`` as it may be printed under the key ``key``: secrets masked, tables and arrays
    masked item by item."""
    if isinstance(value, Mapping):
        table = cast("Mapping[object, object]", value)
        return {name: mask_value(str(name), item) for name, item in table.items()}
    if isinstance(value, list | tuple):
        items = cast("Sequence[object]", value)
        return [mask_value(key, item) for item in items]
    if key is not None and secret_key(key):
        return MASK if value not in (None, "") else value
    if isinstance(value, str):
        if key is not None and env_name_key(key):
            return value if looks_like_env_name(value) or not value else MASK
        return mask_text(value)
    return value


def mask_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` (a message, a value) with every secret in it masked: each of ``secrets``, the
    values of secret-looking environment variables (``OPENAI_API_KEY``, ``*_TOKEN``, ...), URL
    passwords, and anything that looks like a key or token."""
    for secret in sorted({*secrets, *_environment_secrets()}, key=len, reverse=True):
        if len(secret) >= _SHORTEST:
            text = text.replace(secret, MASK)
    text = mask_url(text)
    text = _TOKEN_PREFIXES.sub(MASK, text)
    return _LONG_RUN.sub(lambda m: MASK if _random_looking(m[0]) else m[0], text)


def _environment_secrets() -> list[str]:
    return [
        value
        for name, value in os.environ.items()
        if _SECRET_ENV.search(name)
        and len(value) >= _SHORTEST_IN_ENVIRONMENT
        and not name.lower().endswith("_env")
    ]


def config_secrets(data: Mapping[str, Any]) -> list[str]:
    """Every secret value in a configuration tree: values at secret keys, URL passwords, values
    that look like keys (to be masked in messages that quote them)."""
    found: list[str] = []
    stack: list[tuple[str | None, object]] = [(None, data)]
    while stack:
        key, value = stack.pop()
        if isinstance(value, Mapping):
            table = cast("Mapping[object, object]", value)
            stack.extend((str(name), item) for name, item in table.items())
        elif isinstance(value, list | tuple):
            stack.extend((key, item) for item in cast("Sequence[object]", value))
        elif isinstance(value, str) and value:
            if key is not None and (
                secret_key(key) or (env_name_key(key) and not looks_like_env_name(value))
            ):
                found.append(value)
            else:
                found.extend(match["pw"] for match in _URL_USERINFO.finditer(value))
                if looks_like_secret(value):
                    found.append(value)
    return found


__all__ = [
    "MASK",
    "config_secrets",
    "env_name_key",
    "looks_like_env_name",
    "looks_like_secret",
    "mask_text",
    "mask_url",
    "mask_value",
    "secret_key",
]
