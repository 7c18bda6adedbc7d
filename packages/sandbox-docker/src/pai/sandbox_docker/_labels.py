"""The labels every sandbox container carries, the container name, and reading them back.

A fresh provider in another process finds a key's container by these labels alone:
``pai.namespace``, ``pai.key`` (readable), ``pai.key-b64`` (exact, even for lone surrogates),
``pai.key-sha256`` (what the engine filters on), ``pai.capability``, ``pai.created`` (ISO UTC),
``pai.provider-version`` and, when known, ``pai.uid`` / ``pai.gid`` of the sandbox user.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from datetime import UTC, datetime

LABEL_NAMESPACE = "pai.namespace"
LABEL_KEY = "pai.key"
LABEL_KEY_B64 = "pai.key-b64"
LABEL_KEY_HASH = "pai.key-sha256"
LABEL_CAPABILITY = "pai.capability"
LABEL_CREATED = "pai.created"
LABEL_VERSION = "pai.provider-version"
LABEL_UID = "pai.uid"
LABEL_GID = "pai.gid"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("pai-sandbox-docker")
    except Exception:  # pragma: no cover - not installed as a distribution
        return "0"


PROVIDER_VERSION = _version()


def key_bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogatepass")


def key_hash(key: str) -> str:
    """The SHA-256 of the key (labels filter on it; the key itself is then compared exactly)."""
    return hashlib.sha256(key_bytes(key)).hexdigest()


def container_name(namespace: str, key: str) -> str:
    """The container name for ``key``: bounded length whatever the key, unique per namespace."""
    readable = re.sub(r"[^a-zA-Z0-9_.-]", "-", namespace)[:40].strip("-.") or "ns"
    digest = hashlib.sha256(
        namespace.encode("utf-8", "surrogatepass") + b"\0" + key_bytes(key)
    ).hexdigest()
    return f"pai-{readable}-{digest[:24]}"


def label_key(labels: Mapping[str, str]) -> str | None:
    encoded = labels.get(LABEL_KEY_B64)
    if encoded is not None:
        try:
            return base64.b64decode(encoded).decode("utf-8", "surrogatepass")
        except ValueError:
            return None
    return labels.get(LABEL_KEY)


def numeric_ids(user: str) -> tuple[int, int] | None:
    if user in ("", "root", "0", "0:0"):
        return (0, 0)
    uid, _, gid = user.partition(":")
    if uid.isdigit() and gid.isdigit():
        return int(uid), int(gid)
    return None


def parse_created(labels: Mapping[str, str], fallback: float) -> datetime:
    text = labels.get(LABEL_CREATED)
    if text:
        try:
            parsed = datetime.fromisoformat(text)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        except ValueError:
            pass
    return datetime.fromtimestamp(fallback, UTC)


def parse_docker_time(text: str) -> datetime | None:
    # Docker writes RFC 3339 with nanoseconds: 2024-05-01T12:00:00.123456789Z
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?", text)
    if not match or text.startswith("0001-"):
        return None
    frac = (match.group(2) or "")[:7]
    zone = match.group(3) or "Z"
    zone = "+00:00" if zone == "Z" else zone
    return datetime.fromisoformat(match.group(1) + frac + zone)


def container_labels(namespace: str, key: str, extra: Mapping[str, str]) -> dict[str, str]:
    """The labels of a new container for ``key`` (``extra`` cannot override the ``pai.*`` ones)."""
    try:
        key_bytes(key).decode("utf-8")
        readable = key
    except UnicodeDecodeError:
        readable = key.encode("utf-8", "backslashreplace").decode()
    return {
        **extra,
        LABEL_NAMESPACE: namespace,
        LABEL_KEY: readable,
        LABEL_KEY_B64: base64.b64encode(key_bytes(key)).decode(),
        LABEL_KEY_HASH: key_hash(key),
        LABEL_CAPABILITY: "sandbox",
        LABEL_CREATED: datetime.now(UTC).isoformat(),
        LABEL_VERSION: PROVIDER_VERSION,
    }
