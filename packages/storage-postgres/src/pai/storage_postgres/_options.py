"""Options of :class:`~pai.storage_postgres.PostgresStorage`: from the URL's query and from
keyword arguments, validated before anything connects.

A URL is libpq's (``postgresql://user:password@host:port/dbname?key=value``, or ``postgres://``).
Its query may hold this storage's own options (:data:`OPTION_NAMES`) and any libpq connection
parameter (``sslmode``, ``application_name``, ...), which go to libpq unchanged. A key that is
neither is refused with a "did you mean", and so is a secret in the query (``password=``): tools
that mask ``user:password@`` in URLs do not know to mask it there, so it would be printed.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qsl, unquote, urlsplit

from pai.core import ConfigError
from pai.core.ext import did_you_mean

__all__ = [
    "DEFAULT_SCHEMA",
    "OPTION_NAMES",
    "ConnectionSettings",
    "PostgresOptions",
    "mask_url",
    "parse_url",
]

DEFAULT_SCHEMA: Final = "public"

OPTION_NAMES: Final = (
    "schema",
    "pool_min_size",
    "pool_max_size",
    "connect_timeout",
    "password_env",
    "migrate",
)
"""The options this storage takes itself (in the URL's query or as keyword arguments)."""

_SECRET_QUERY_KEYS: Final = frozenset(
    {"password", "sslpassword", "scram_client_key", "scram_server_key", "oauth_client_secret"}
)

_LIBPQ_KEYS: Final = frozenset(
    {
        "application_name",
        "channel_binding",
        "client_encoding",
        "fallback_application_name",
        "gssdelegation",
        "gssencmode",
        "gsslib",
        "host",
        "hostaddr",
        "keepalives",
        "keepalives_count",
        "keepalives_idle",
        "keepalives_interval",
        "krbsrvname",
        "load_balance_hosts",
        "max_protocol_version",
        "min_protocol_version",
        "oauth_client_id",
        "oauth_issuer",
        "oauth_scope",
        "options",
        "passfile",
        "port",
        "require_auth",
        "requirepeer",
        "service",
        "ssl_max_protocol_version",
        "ssl_min_protocol_version",
        "sslcert",
        "sslcertmode",
        "sslcompression",
        "sslcrl",
        "sslcrldir",
        "sslkey",
        "sslkeylogfile",
        "sslmode",
        "sslnegotiation",
        "sslrootcert",
        "sslsni",
        "target_session_attrs",
        "tcp_user_timeout",
        "user",
        "dbname",
    }
)
"""libpq connection parameters a URL's query may carry (those of libpq 17; an older libpq
refuses the ones it does not know when it connects)."""

_SCHEMES: Final = ("postgresql", "postgres")
_MAX_IDENTIFIER_BYTES: Final = 63

_USERINFO: Final = re.compile(
    r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/?#@]*):[^@/?#]*@"
)
_QUERY_SECRET: Final = re.compile(
    r"(?P<key>[?&](?:" + "|".join(sorted(_SECRET_QUERY_KEYS)) + r")=)[^&#]*", re.IGNORECASE
)


def mask_url(url: str) -> str:
    """``url`` as it may be printed: the password of ``user:password@`` and any secret query
    parameter (``password=``) replaced by ``***``.

    Example::

        mask_url("postgresql://app:s3cret@db/app") == "postgresql://app:***@db/app"
    """
    masked = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", url, count=1)
    return _QUERY_SECRET.sub(lambda m: f"{m['key']}***", masked)


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """What a :class:`~pai.storage_postgres.PostgresStorage` was configured with (no secret).

    ``schema`` holds the tables (two apps on one database use two schemas); ``pool_min_size``
    and ``pool_max_size`` bound the connections each process keeps; ``connect_timeout`` is how
    many seconds a call may wait for a connection, reconnecting after the server restarted
    included; ``password_env`` names the environment variable holding the password;
    ``migrate`` says whether opening the storage applies pending migrations (else it refuses a
    schema that is not up to date, and ``pai storage migrate`` applies them).
    """

    schema: str = DEFAULT_SCHEMA
    pool_min_size: int = 1
    pool_max_size: int = 10
    connect_timeout: float = 10.0
    password_env: str | None = None
    migrate: bool = True


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """A parsed URL: what libpq gets (with the password), and what may be shown (without)."""

    conninfo: Mapping[str, str]
    """libpq connection parameters, the password included: never print it."""
    display: str
    """The URL with its password masked, for messages and reprs."""
    options: PostgresOptions
    password_source: str | None
    """Where the password came from (``"the URL"``, ``"PASSWORD_VAR (password_env)"``), or
    ``None`` when libpq finds it itself (``PGPASSWORD``, a password file) or none is needed."""


def _refuse(display: str, source: str, problem: str) -> ConfigError:
    return ConfigError(f"storage URL {display!r} ({source}): {problem}")


def _int_option(name: str, raw: object, display: str, source: str, *, minimum: int) -> int:
    if isinstance(raw, bool):
        value = None
    elif isinstance(raw, int):
        value = raw
    elif isinstance(raw, str) and re.fullmatch(r"\s*[0-9]+\s*", raw):
        value = int(raw)
    else:
        value = None
    if value is None or value < minimum:
        raise _refuse(
            display,
            source,
            f"{name}={raw!r} is not a whole number >= {minimum}; write e.g. {name}={max(minimum, 4)}",
        )
    return value


def _float_option(name: str, raw: object, display: str, source: str) -> float:
    value: float | None
    if isinstance(raw, bool):
        value = None
    elif isinstance(raw, int | float):
        value = float(raw)
    else:
        try:
            value = float(str(raw))
        except ValueError:
            value = None
    if value is None or not math.isfinite(value) or value <= 0:
        raise _refuse(
            display, source, f"{name}={raw!r} is not a number of seconds > 0; write e.g. {name}=10"
        )
    return value


def _bool_option(name: str, raw: object, display: str, source: str) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise _refuse(display, source, f"{name}={raw!r} is not true or false; write {name}=false")


def _schema_option(raw: object, display: str, source: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise _refuse(
            display, source, f"schema={raw!r} is not a schema name; write e.g. schema=myapp"
        )
    problem = ""
    if "\x00" in raw:
        problem = "holds a NUL character"
    elif len(raw.encode("utf-8", "surrogatepass")) > _MAX_IDENTIFIER_BYTES:
        problem = f"is longer than PostgreSQL's {_MAX_IDENTIFIER_BYTES} bytes for a name"
    elif raw.lower().startswith("pg_"):
        problem = "starts with pg_, which PostgreSQL keeps for its own schemas"
    else:
        try:
            raw.encode()
        except UnicodeEncodeError:
            problem = "is not valid Unicode (it holds a lone surrogate)"
    if problem:
        raise _refuse(
            display, source, f"schema={raw!r} {problem}; choose another name, e.g. schema=myapp"
        )
    return raw


def _env_name_option(raw: object, display: str, source: str) -> str:
    if not isinstance(raw, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", raw):
        # The value may be a password pasted where a variable name belongs: never show it.
        raise _refuse(
            display,
            source,
            "password_env must name an environment variable (letters, digits and _, e.g. "
            "password_env=PAI_DB_PASSWORD), and what was given is not such a name (not shown, "
            "in case it is the password itself)",
        )
    return raw


def _check_ports(ports: str, display: str, source: str) -> None:
    for port in ports.split(","):
        if port == "":
            continue
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise _refuse(
                display,
                source,
                f"the port {port!r} is not a number from 1 to 65535; write e.g. "
                "postgresql://user@127.0.0.1:5432/dbname",
            )


def parse_url(
    url: str,
    *,
    source: str = "code",
    environ: Mapping[str, str] | None = None,
    **overrides: object,
) -> ConnectionSettings:
    """Split ``url`` into libpq's parameters and this storage's options; keyword ``overrides``
    (``schema="app"``) set options too, and may not contradict the URL. Raises
    :class:`~pai.core.ConfigError` naming the masked URL, ``source`` (where the URL came from)
    and the fix.

    Example::

        settings = parse_url("postgresql://app@127.0.0.1/app?schema=tenant1&pool_max_size=4")
        settings.options.schema == "tenant1"
    """
    env = os.environ if environ is None else environ
    if not isinstance(url, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigError(
            f"the PostgreSQL storage URL ({source}) must be a string such as "
            f"'postgresql://user@127.0.0.1:5432/dbname', got {type(url).__name__}"
        )
    display = mask_url(url)
    split = urlsplit(url)
    if split.scheme.lower() not in _SCHEMES or not url.lower().startswith(
        tuple(f"{scheme}://" for scheme in _SCHEMES)
    ):
        raise _refuse(
            display,
            source,
            "a PostgreSQL URL starts with postgresql:// (or postgres://), e.g. "
            "postgresql://user@127.0.0.1:5432/dbname",
        )
    if split.fragment:
        raise _refuse(
            display, source, "it has a #fragment, which a PostgreSQL URL does not take; remove it"
        )
    pairs = parse_qsl(split.query, keep_blank_values=True)
    given: dict[str, object] = {}
    libpq: dict[str, str] = {}
    for key, value in pairs:
        if key in _SECRET_QUERY_KEYS:
            raise _refuse(
                display,
                source,
                f"it carries {key}= in its query; put the password in user:password@ of the "
                "URL, in PGPASSWORD, or in a variable that password_env names "
                "(?password_env=PAI_DB_PASSWORD) instead",
            )
        if key in given or key in libpq:
            raise _refuse(display, source, f"the option {key!r} is given twice; keep one")
        if key in OPTION_NAMES:
            given[key] = value
        elif key in _LIBPQ_KEYS:
            libpq[key] = value
        else:
            hint = did_you_mean(key, [*OPTION_NAMES, *_LIBPQ_KEYS])
            raise _refuse(
                display,
                source,
                f"unknown option {key!r}; {hint}this storage takes {', '.join(OPTION_NAMES)}, "
                "and any libpq connection parameter (sslmode, application_name, ...)",
            )
    for key, value in overrides.items():
        if key not in OPTION_NAMES:
            hint = did_you_mean(key, OPTION_NAMES)
            raise TypeError(
                f"PostgresStorage() got an unexpected keyword argument {key!r}; {hint}it takes "
                f"{', '.join(OPTION_NAMES)}"
            )
        if value is None:
            continue
        if key in given and str(given[key]) != str(value):
            raise _refuse(
                display,
                source,
                f"{key}={given[key]!r} in the URL and {key}={value!r} as an argument; give it once",
            )
        given[key] = value

    defaults = PostgresOptions()
    schema = _schema_option(given.get("schema", defaults.schema), display, source)
    pool_min = _int_option(
        "pool_min_size",
        given.get("pool_min_size", defaults.pool_min_size),
        display,
        source,
        minimum=0,
    )
    pool_max = _int_option(
        "pool_max_size",
        given.get("pool_max_size", defaults.pool_max_size),
        display,
        source,
        minimum=1,
    )
    if pool_min > pool_max:
        raise _refuse(
            display,
            source,
            f"pool_min_size={pool_min} is more than pool_max_size={pool_max}; lower the first "
            "or raise the second",
        )
    timeout = _float_option(
        "connect_timeout", given.get("connect_timeout", defaults.connect_timeout), display, source
    )
    migrate = _bool_option("migrate", given.get("migrate", defaults.migrate), display, source)
    password_env = None
    if "password_env" in given:
        password_env = _env_name_option(given["password_env"], display, source)

    # libpq's own parsing (percent-escapes, several hosts, IPv6) from the URL without our options.
    netloc = split.netloc
    password: str | None = None
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        user, colon, raw_password = userinfo.partition(":")
        if colon:
            password = unquote(raw_password)
            netloc = f"{user}@{hostport}"
    if re.search(r"[\s]", netloc):
        raise _refuse(display, source, "its host part holds a space; remove it")
    for part in hostport.split(","):
        # [::1]:5432 (IPv6 in brackets), host:5432, or a host alone.
        port = part.rpartition("]")[2] if part.startswith("[") else part
        _check_ports(port.rpartition(":")[2] if ":" in port else "", display, source)
    if "port" in libpq:
        _check_ports(libpq["port"], display, source)
    base = f"{split.scheme}://{netloc}{split.path}"
    try:
        from psycopg.conninfo import conninfo_to_dict

        parsed = conninfo_to_dict(base)
    except Exception as error:  # psycopg.ProgrammingError: libpq refused the URL
        text = mask_url(str(error).strip()) or type(error).__name__
        raise _refuse(
            display,
            source,
            f"libpq cannot read it ({text}); write it as "
            "postgresql://user@host:port/dbname?option=value",
        ) from None
    conninfo: dict[str, str] = {key: str(value) for key, value in parsed.items()}
    conninfo.update(libpq)
    conninfo.pop("password", None)
    password_source: str | None = None
    if password is not None:
        if password_env is not None:
            raise _refuse(
                display,
                source,
                f"it has a password and names password_env={password_env}; give the password "
                "one way: remove it from the URL, or drop password_env",
            )
        conninfo["password"] = password
        password_source = "the URL"
    elif password_env is not None:
        value = env.get(password_env)
        if not value:
            raise _refuse(
                display,
                source,
                f"password_env={password_env} names an environment variable that is "
                f"{'empty' if value == '' else 'not set'}; set {password_env} to the "
                "database password",
            )
        conninfo["password"] = value
        password_source = f"{password_env} (password_env)"
    conninfo.setdefault("application_name", "pai")
    # libpq's connect_timeout is whole seconds (0 would mean forever).
    conninfo["connect_timeout"] = str(max(1, math.ceil(timeout)))
    options = PostgresOptions(
        schema=schema,
        pool_min_size=pool_min,
        pool_max_size=pool_max,
        connect_timeout=timeout,
        password_env=password_env,
        migrate=migrate,
    )
    return ConnectionSettings(
        conninfo=conninfo, display=display, options=options, password_source=password_source
    )


def quote_identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier: ``my"app`` -> ``"my""app"``."""
    return '"' + name.replace('"', '""') + '"'
