"""Everyday commands as GNU coreutils on Linux print them, over the sandbox's filesystem.

just-bash 0.2.1 lacks ``uname``, ``id``, ``mktemp`` and ``date -d``; its ``ls -l`` prints every
time as ``Jan  1 00:00`` and an empty folder as a blank line; ``stat`` follows links and has its
own layout; ``paste`` needs a file operand and ``xargs`` ignores ``-n1`` and splits ``-I`` input
on blanks. This module replaces those commands (registered by ``_commands.command_registry``)
and patches two spots of the interpreter (``patch_interpreter``): a missing command says that
the in-memory sandbox has no such program, and ``find -mtime`` counts whole days as GNU does.

The sandbox's identity is fixed and the same everywhere: the user ``user`` (uid 1000) in the
group ``user`` (gid 1000), a Linux kernel of :data:`UNAME`, and a host name derived from the
instance key (the provider computes it), which the worker sets per command (``use_hostname``).
Times are the filesystem's own (``HostFs`` entries carry real modification times), shown in the
shell's ``TZ`` as ``_zones`` reads it from the sandbox's files, never through the C library.
"""

from __future__ import annotations

import calendar
import contextlib
import math
import posixpath
import re
import secrets
import stat as stat_bits
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from typing import Any

from just_bash.types import Command, CommandContext, ExecResult

from pai.sandbox_inmemory._protocol import DEVICES
from pai.sandbox_inmemory._worker import _zones

__all__ = [
    "GID",
    "GROUP",
    "UID",
    "UNAME",
    "USER",
    "DateError",
    "format_time",
    "parse_date",
    "patch_interpreter",
    "replaced_commands",
    "use_hostname",
]

USER = "user"
"""The sandbox's one user, as ``whoami``, ``id -un``, ``$USER`` and ``ls -l`` show it."""
UID = 1000
GROUP = "user"
GID = 1000

UNAME: dict[str, str] = {
    "s": "Linux",
    "r": "6.1.0-pai-inmemory",
    "v": "#1 SMP PREEMPT_DYNAMIC pai-sandbox-inmemory",
    "m": "x86_64",
    "p": "unknown",
    "i": "unknown",
    "o": "GNU/Linux",
}
"""The fixed kernel identity ``uname`` prints (``-n`` is the instance's host name): a Linux
kernel on x86-64, named so that no one mistakes it for the host's."""

_DEFAULT_HOSTNAME = "sandbox"
_hostname = [_DEFAULT_HOSTNAME]


def use_hostname(name: object) -> str:
    """Set the host name the next command sees (the worker calls this with each command's
    request); returns it, for ``$HOSTNAME``."""
    text = name if isinstance(name, str) and name else _DEFAULT_HOSTNAME
    _hostname[0] = text
    return text


def _result(stdout: str = "", stderr: str = "", exit_code: int = 0) -> ExecResult:
    return ExecResult(stdout=stdout, stderr=stderr, exit_code=exit_code)


def _usage_error(command: str, message: str, exit_code: int = 1) -> ExecResult:
    return _result(
        stderr=f"{command}: {message}\nTry '{command} --help' for more information.\n",
        exit_code=exit_code,
    )


def _unsupported(command: str, what: str, exit_code: int = 1) -> ExecResult:
    return _result(
        stderr=f"{command}: {what} is not supported by the in-memory shell "
        '(pai-sandbox-inmemory; use provider = "docker" for the real command)\n',
        exit_code=exit_code,
    )


# -- time: zones, formats and date strings ---------------------------------------------------------


def _zone(ctx: CommandContext, utc: bool = False) -> tzinfo:
    """The zone the shell's ``TZ`` names, read from the sandbox's files (``_zones``)."""
    if utc:
        return UTC
    tz = ctx.env.get("TZ")
    return _zones.zone_for(tz if isinstance(tz, str) else None, ctx.fs)


_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

# conversion -> (default padding, default width) of the numeric ones
_NUMERIC: dict[str, tuple[str, int]] = {
    "C": ("0", 2),
    "d": ("0", 2),
    "e": (" ", 2),
    "g": ("0", 2),
    "G": ("0", 1),
    "H": ("0", 2),
    "I": ("0", 2),
    "j": ("0", 3),
    "k": (" ", 2),
    "l": (" ", 2),
    "m": ("0", 2),
    "M": ("0", 2),
    "q": ("0", 1),
    "s": ("0", 1),
    "S": ("0", 2),
    "u": ("0", 1),
    "U": ("0", 2),
    "V": ("0", 2),
    "w": ("0", 1),
    "W": ("0", 2),
    "y": ("0", 2),
    "Y": ("0", 1),
}
_COMPOSITE = {
    "c": "%a %b %e %H:%M:%S %Y",
    "D": "%m/%d/%y",
    "F": "%Y-%m-%d",
    "r": "%I:%M:%S %p",
    "R": "%H:%M",
    "T": "%H:%M:%S",
    "x": "%m/%d/%y",
    "X": "%H:%M:%S",
    "h": "%b",
}
_CONVERSION = re.compile(r"%([-_0^#]*)(\d*)([EO]?)(:{0,3}[a-zA-Z%+])")


def _offset_text(offset: timedelta | None, colons: int) -> str:
    seconds = int(offset.total_seconds()) if offset is not None else 0
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if colons == 0:
        return f"{sign}{hours:02d}{minutes:02d}"
    if colons == 1:
        return f"{sign}{hours:02d}:{minutes:02d}"
    if colons == 2:
        return f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
    # :::z, the minimal precision that is exact
    if secs:
        return f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{sign}{hours:02d}:{minutes:02d}" if minutes else f"{sign}{hours:02d}"


def _numeric(moment: datetime, conversion: str, nanos: int) -> int:
    if conversion == "s":
        return calendar.timegm(moment.utctimetuple())
    values: dict[str, Callable[[], int]] = {
        "C": lambda: moment.year // 100,
        "d": lambda: moment.day,
        "e": lambda: moment.day,
        "g": lambda: moment.isocalendar()[0] % 100,
        "G": lambda: moment.isocalendar()[0],
        "H": lambda: moment.hour,
        "I": lambda: moment.hour % 12 or 12,
        "j": lambda: moment.timetuple().tm_yday,
        "k": lambda: moment.hour,
        "l": lambda: moment.hour % 12 or 12,
        "m": lambda: moment.month,
        "M": lambda: moment.minute,
        "q": lambda: (moment.month - 1) // 3 + 1,
        "S": lambda: moment.second,
        "u": lambda: moment.isoweekday(),
        "U": lambda: int(moment.strftime("%U")),
        "V": lambda: moment.isocalendar()[1],
        "w": lambda: moment.isoweekday() % 7,
        "W": lambda: int(moment.strftime("%W")),
        "y": lambda: moment.year % 100,
        "Y": lambda: moment.year,
    }
    return values[conversion]()


def format_time(fmt: str, moment: datetime, nanos: int = 0) -> str:
    """``moment`` (an aware datetime) formatted as GNU ``date +FORMAT`` does in the C locale:
    flags ``-_0^#``, field widths, ``%N`` (``nanos``), ``%:z``/``%::z``/``%:::z``, ``%q``.

    >>> format_time("%F %T %:z", datetime(2024, 1, 15, 10, 30, tzinfo=UTC))
    '2024-01-15 10:30:00 +00:00'
    """

    def convert(match: re.Match[str]) -> str:
        flags, width_text, _, spec = match.groups()
        conversion = spec[-1]
        colons = len(spec) - 1
        width = int(width_text) if width_text else None
        if colons and conversion != "z":
            return match.group(0)
        upper = "^" in flags
        swap = "#" in flags
        if conversion in _COMPOSITE:
            text = format_time(_COMPOSITE[conversion], moment, nanos)
            return _pad_text(text.upper() if upper else text, flags, width)
        if conversion == "N":
            digits = f"{nanos:09d}"
            return digits[: width or 9].ljust(width or 9, "0") if width else digits
        if conversion in _NUMERIC:
            pad, default = _NUMERIC[conversion]
            value = _numeric(moment, conversion, nanos)
            return _pad_number(value, flags, width, pad, default)
        text: str
        if conversion == "a":
            text = _DAYS[moment.weekday()][:3]
        elif conversion == "A":
            text = _DAYS[moment.weekday()]
        elif conversion == "b":
            text = _MONTHS[moment.month - 1][:3]
        elif conversion == "B":
            text = _MONTHS[moment.month - 1]
        elif conversion == "p":
            text = "AM" if moment.hour < 12 else "PM"
            if swap:
                return _pad_text(text.lower(), flags, width)
        elif conversion == "P":
            text = "am" if moment.hour < 12 else "pm"
        elif conversion == "Z":
            text = moment.tzname() or ""
            if swap:
                return _pad_text(text.lower(), flags, width)
        elif conversion == "z":
            text = _offset_text(moment.utcoffset(), colons)
            return _pad_text(text, flags.replace("0", ""), width)
        elif conversion == "n":
            text = "\n"
        elif conversion == "t":
            text = "\t"
        elif conversion == "%":
            text = "%"
        elif conversion == "+":
            text = format_time("%a %b %e %H:%M:%S %Z %Y", moment, nanos)
        else:
            return match.group(0)
        if upper or (swap and conversion in "aAbBh"):
            text = text.upper()
        return _pad_text(text, flags, width)

    return _CONVERSION.sub(convert, fmt)


def _pad_number(value: int, flags: str, width: int | None, pad: str, default: int) -> str:
    digits = str(abs(value))
    sign = "-" if value < 0 else ""
    if "-" in flags:
        return sign + digits
    if "_" in flags:
        pad = " "
    elif "0" in flags:
        pad = "0"
    size = (width if width is not None else default) - len(sign)
    if pad == "0":
        return sign + digits.rjust(size, "0")
    return (sign + digits).rjust(size + len(sign), " ")


def _pad_text(text: str, flags: str, width: int | None) -> str:
    if width is None or "-" in flags:
        return text
    return text.rjust(width, "0" if "0" in flags else " ")


class DateError(ValueError):
    """A date string ``date -d`` (or ``touch -d``) cannot read."""


_MONTH_NAMES = {name[:3].lower(): index + 1 for index, name in enumerate(_MONTHS)}
_MONTH_WORD = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_UNITS = {
    "year": ("months", 12),
    "month": ("months", 1),
    "fortnight": ("days", 14),
    "week": ("days", 7),
    "day": ("days", 1),
    "hour": ("seconds", 3600),
    "minute": ("seconds", 60),
    "min": ("seconds", 60),
    "second": ("seconds", 1),
    "sec": ("seconds", 1),
}
_UNIT_WORD = r"(years?|months?|fortnights?|weeks?|days?|hours?|minutes?|mins?|seconds?|secs?)\b"

_ISO = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})(?:(?:t|\s+)(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?"
)
_SLASHED = re.compile(r"(\d{1,2})/(\d{1,2})(?:/(\d{4}|\d{2}))?\b")
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(?:\s*([ap])\.?m\.?\b)?")
_DAY_MONTH = re.compile(r"(\d{1,2})(?:st|nd|rd|th)?[\s-]+" + _MONTH_WORD + r"(?:[\s-]+(\d{4}))?")
_MONTH_DAY = re.compile(_MONTH_WORD + r"\s+(\d{1,2})(?:st|nd|rd|th)?\b,?(?:\s+(\d{4})\b)?")
_ZONE_WORD = re.compile(r"(z|utc|gmt|ut)\b")
_ZONE_NUMBER = re.compile(r"([+-])(\d{1,2})(?::?(\d{2}))?\b")
_RELATIVE = re.compile(r"(?:(next|last|this)\s+|([+-]?\s*\d+)\s*)?" + _UNIT_WORD + r"(\s+ago\b)?")
_WORDS = re.compile(r"(now|today|yesterday|tomorrow|midnight|noon)\b")
_EPOCH = re.compile(r"@\s*([+-]?\d+)(?:[.,](\d+))?")

_DATE_FORMS = (
    "YYYY-MM-DD[ HH:MM[:SS[.frac]]] with an optional zone (Z, UTC, +HH:MM), @SECONDS, "
    "MM/DD/YYYY, 'Jan 15 2024', '15 Jan 2024', HH:MM, now, today, yesterday, tomorrow, "
    "and relative items such as '2 days ago', '+1 week', 'next month'"
)


@dataclass
class _Parsed:
    day: tuple[int, int, int] | None = None
    clock: tuple[int, int, int, int] | None = None  # hours, minutes, seconds, nanoseconds
    offset: int | None = None  # seconds east of UTC
    months: int = 0
    days: int = 0
    seconds: int = 0


def _fraction(digits: str | None) -> int:
    return int((digits or "0")[:9].ljust(9, "0"))


def _scan(text: str) -> _Parsed:
    parsed = _Parsed()
    position = 0
    after_clock = False
    while True:
        while position < len(text) and text[position] in " \t\n,":
            position += 1
        if position >= len(text):
            return parsed
        rest = text[position:]
        just_clock = after_clock
        after_clock = False
        if (match := _ISO.match(rest)) is not None and parsed.day is None:
            parsed.day = (int(match[1]), int(match[2]), int(match[3]))
            if match[4] is not None:
                parsed.clock = (
                    int(match[4]),
                    int(match[5]),
                    int(match[6] or 0),
                    _fraction(match[7]),
                )
                after_clock = True
        elif (match := _SLASHED.match(rest)) is not None and parsed.day is None:
            year = int(match[3]) if match[3] else datetime.now(UTC).year
            if match[3] and len(match[3]) == 2:
                year += 1900 if year >= 69 else 2000
            parsed.day = (year, int(match[1]), int(match[2]))
        elif (match := _DAY_MONTH.match(rest)) is not None and parsed.day is None:
            year = int(match[3]) if match[3] else 0
            parsed.day = (year, _MONTH_NAMES[match[2][:3]], int(match[1]))
        elif (match := _MONTH_DAY.match(rest)) is not None and parsed.day is None:
            year = int(match[3]) if match[3] else 0
            parsed.day = (year, _MONTH_NAMES[match[1][:3]], int(match[2]))
        elif (match := _CLOCK.match(rest)) is not None and parsed.clock is None:
            hours = int(match[1])
            if match[5]:
                if not 1 <= hours <= 12:
                    raise DateError(text)
                hours = hours % 12 + (12 if match[5] == "p" else 0)
            parsed.clock = (hours, int(match[2]), int(match[3] or 0), _fraction(match[4]))
            after_clock = True
        elif (match := _ZONE_WORD.match(rest)) is not None and parsed.offset is None:
            parsed.offset = 0
            after_clock = just_clock
        elif (
            just_clock and parsed.offset is None and (match := _ZONE_NUMBER.match(rest)) is not None
        ):
            # After a time of day a signed number is a zone, as GNU date reads it
            # ("12:00 -3 hours" is 12:00 at UTC-3, plus one hour).
            hours = int(match[2])
            minutes = int(match[3] or 0)
            if match[3] is None and len(match[2]) > 2:
                raise DateError(text)
            parsed.offset = (1 if match[1] == "+" else -1) * (hours * 3600 + minutes * 60)
        elif (match := _RELATIVE.match(rest)) is not None:
            word, number, unit, ago = match.groups()
            if word is not None:
                count = {"next": 1, "last": -1, "this": 0}[word]
            elif number is not None:
                count = int(number.replace(" ", ""))
            else:
                count = 1
            if ago:
                count = -count
            field, size = _UNITS[unit.rstrip("s") if unit not in ("days",) else "day"]
            setattr(parsed, field, getattr(parsed, field) + count * size)
        elif (match := _WORDS.match(rest)) is not None:
            word = match[1]
            if word == "yesterday":
                parsed.days -= 1
            elif word == "tomorrow":
                parsed.days += 1
            elif word == "midnight":
                parsed.clock = (0, 0, 0, 0)
            elif word == "noon":
                parsed.clock = (12, 0, 0, 0)
        else:
            raise DateError(text)
        position += match.end()


def parse_date(text: str, zone: tzinfo, now_ns: int | None = None) -> int:
    """Nanoseconds since the epoch for a ``date -d`` string, read in ``zone`` (see
    ``_DATE_FORMS`` for what is understood); raises :class:`DateError` for anything else.

    >>> parse_date("@1.5", UTC)
    1500000000
    >>> parse_date("2024-01-15 10:30:00 UTC", UTC) // 10**9
    1705314600
    """
    now = time.time_ns() if now_ns is None else now_ns
    stripped = text.strip().lower()
    if (match := _EPOCH.fullmatch(stripped)) is not None:
        whole = int(match[1])
        fraction = _fraction(match[2])
        return whole * 10**9 + (-fraction if match[1].startswith("-") else fraction)
    parsed = _scan(stripped)
    current = datetime.fromtimestamp(now // 10**9, zone)
    nanos = now % 10**9
    if not stripped:  # an empty string is the start of today
        parsed.clock = (0, 0, 0, 0)
    if parsed.day is not None:
        year, month, day = parsed.day
        wall_date = (year or current.year, month, day)
        if parsed.clock is None:
            parsed.clock = (0, 0, 0, 0)
    else:
        wall_date = (current.year, current.month, current.day)
    if parsed.clock is not None:
        hours, minutes, seconds, nanos = parsed.clock
    else:
        hours, minutes, seconds = current.hour, current.minute, current.second
    try:
        wall = datetime(*wall_date, hours, minutes, seconds)
    except ValueError:
        raise DateError(text) from None
    if parsed.months:
        index = wall.year * 12 + wall.month - 1 + parsed.months
        first = date(index // 12, index % 12 + 1, 1)
        shifted = first + timedelta(days=wall.day - 1)  # Jan 31 + 1 month = Mar 2 or 3
        wall = datetime.combine(shifted, wall.time())
    wall += timedelta(days=parsed.days)
    place = zone if parsed.offset is None else timezone(timedelta(seconds=parsed.offset))
    try:
        moment = wall.replace(tzinfo=place)
        seconds_since = calendar.timegm(moment.utctimetuple())
    except (OverflowError, ValueError):
        raise DateError(text) from None
    return (seconds_since + parsed.seconds) * 10**9 + nanos


def _moment(nanoseconds: int, zone: tzinfo) -> tuple[datetime, int]:
    seconds, nanos = divmod(nanoseconds, 10**9)
    return datetime.fromtimestamp(seconds, zone), nanos


def _time_of(mtime: float) -> int:
    """A filesystem ``mtime`` (float seconds) as nanoseconds, to the microsecond it holds."""
    return round(mtime * 1_000_000) * 1000


# -- the filesystem as coreutils shows it --------------------------------------------------------


@dataclass
class _Info:
    """What ``ls`` and ``stat`` show of one entry."""

    path: str
    is_file: bool
    is_directory: bool
    is_link: bool
    mode: int
    size: int
    mtime: int  # nanoseconds
    links: int
    target: str | None = None

    @property
    def device(self) -> tuple[int, int] | None:
        return DEVICES.get(self.path) if self.is_file else None

    @property
    def owner(self) -> tuple[str, int]:
        return ("root", 0) if self.path in DEVICES or self.path == "/dev" else (USER, UID)

    @property
    def group(self) -> tuple[str, int]:
        return ("root", 0) if self.path in DEVICES or self.path == "/dev" else (GROUP, GID)

    @property
    def type_char(self) -> str:
        if self.is_link:
            return "l"
        if self.is_directory:
            return "d"
        return "c" if self.device is not None else "-"

    @property
    def shown_size(self) -> int:
        # A folder takes one 4 KiB block on ext4, which is what a container shows.
        return 4096 if self.is_directory else self.size

    @property
    def blocks_1k(self) -> int:
        if self.is_link or self.device is not None:
            return 0
        return 4 * math.ceil(self.shown_size / 4096)


def _join(folder: str, name: str) -> str:
    return f"/{name}" if folder == "/" else f"{folder}/{name}"


async def _info(fs: Any, path: str, *, follow: bool, links_needed: bool = True) -> _Info:
    """The entry at ``path`` (a link itself unless ``follow``); raises the fs's ``OSError``.
    A folder's link count (2 and one per subfolder) costs a listing: ``links_needed``."""
    st: Any = await (fs.stat(path) if follow else fs.lstat(path))
    links = 1
    target = None
    if st.is_directory and links_needed:
        entries: list[Any] = await fs.readdir_with_file_types(path)
        links = 2 + sum(1 for entry in entries if entry.is_directory)
    elif st.is_symbolic_link:
        target = str(await fs.readlink(path))
    # Devices are empty files: only then can a followed path be one under another name.
    real = await fs.realpath(path) if follow and st.is_file and not st.size else path
    return _Info(
        path=real if real in DEVICES else path,
        is_file=bool(st.is_file),
        is_directory=bool(st.is_directory),
        is_link=bool(st.is_symbolic_link),
        mode=int(st.mode) & 0o7777,
        size=int(st.size),
        mtime=_time_of(float(st.mtime or 0)),
        links=links,
        target=target,
    )


def _mode_text(info: _Info) -> str:
    mode = info.mode
    text = info.type_char
    for shift in (6, 3, 0):
        bits = (mode >> shift) & 7
        text += "r" if bits & 4 else "-"
        text += "w" if bits & 2 else "-"
        special = {6: stat_bits.S_ISUID, 3: stat_bits.S_ISGID, 0: stat_bits.S_ISVTX}[shift]
        execute = bits & 1
        if mode & special:
            letter = "t" if shift == 0 else "s"
            text += letter if execute else letter.upper()
        else:
            text += "x" if execute else "-"
    return text


def _human(size: int) -> str:
    """A size as ``ls -h`` prints it: powers of 1024, rounded up, one decimal below 10."""
    if size < 1024:
        return str(size)
    value = float(size)
    for unit in "KMGTPEZY":
        value /= 1024
        if value < 10:
            tenths = math.ceil(value * 10 - 1e-9) / 10
            if tenths < 10:
                return f"{tenths:.1f}{unit}"
            return f"10{unit}"
        whole = math.ceil(value - 1e-9)
        if whole < 1024:
            return f"{whole}{unit}"
    return f"{math.ceil(value)}Y"


# -- ls -------------------------------------------------------------------------------------------

_SIX_MONTHS = 31556952 // 2  # half a Gregorian year, as GNU ls counts "recent"


@dataclass
class _LsOptions:
    all: bool = False
    almost_all: bool = False
    long: bool = False
    owner: bool = True
    group: bool = True
    numeric: bool = False
    recursive: bool = False
    directory: bool = False
    classify: bool = False
    slash: bool = False
    human: bool = False
    reverse: bool = False
    sort: str = "name"  # name, time, size, none, extension
    dereference: bool = False
    time_style: str = "locale"
    group_directories_first: bool = False


_LS_LETTERS = {
    "a": ("all", True),
    "A": ("almost_all", True),
    "l": ("long", True),
    "1": (None, None),
    "R": ("recursive", True),
    "d": ("directory", True),
    "F": ("classify", True),
    "p": ("slash", True),
    "h": ("human", True),
    "r": ("reverse", True),
    "n": ("numeric", True),
    "L": ("dereference", True),
}
_LS_LONG_OPTIONS = {
    "--all": ("all", True),
    "--almost-all": ("almost_all", True),
    "--recursive": ("recursive", True),
    "--directory": ("directory", True),
    "--classify": ("classify", True),
    "--human-readable": ("human", True),
    "--reverse": ("reverse", True),
    "--numeric-uid-gid": ("numeric", True),
    "--dereference": ("dereference", True),
    "--group-directories-first": ("group_directories_first", True),
    "--full-time": ("time_style", "full-iso"),
}
_LS_SORTS = {"none": "none", "size": "size", "time": "time", "extension": "extension"}


def _ls_options(args: list[str]) -> tuple[_LsOptions, list[str]] | ExecResult:
    options = _LsOptions()
    operands: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            operands.extend(args[index:])
            break
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            if arg in _LS_LONG_OPTIONS:
                field, setting = _LS_LONG_OPTIONS[arg]
                setattr(options, field, setting)
                if arg == "--full-time":
                    options.long = True
            elif name == "--color" and value in (
                "",
                "never",
                "no",
                "none",
                "auto",
                "tty",
                "if-tty",
            ):
                if value == "":
                    return _unsupported("ls", "coloured output (--color=always)", 2)
            elif name == "--color":
                return _unsupported("ls", f"coloured output ({arg})", 2)
            elif name == "--sort" and value in _LS_SORTS:
                options.sort = _LS_SORTS[value]
            elif name == "--time-style" and value:
                options.time_style = value
            elif name == "--indicator-style" and value in ("none", "slash", "classify"):
                options.classify = value == "classify"
                options.slash = value == "slash"
            else:
                return _usage_error("ls", f"unrecognized option '{arg}'", 2)
            continue
        if arg.startswith("-") and arg != "-":
            for letter in arg[1:]:
                if letter in _LS_LETTERS:
                    field, setting = _LS_LETTERS[letter]
                    if field is not None:
                        setattr(options, field, setting)
                elif letter in "gGo":
                    options.long = options.long or letter != "G"
                    if letter == "g":
                        options.owner = False
                    else:
                        options.group = False
                elif letter in "tSUX":
                    options.sort = {"t": "time", "S": "size", "U": "none", "X": "extension"}[letter]
                elif letter == "f":
                    options.all, options.sort = True, "none"
                elif letter in "cu":
                    pass  # ctime, atime: the in-memory filesystem keeps one time per entry
                elif letter in "CxmisQbkZ":
                    what = {
                        "C": "column output (-C)",
                        "x": "column output (-x)",
                        "m": "comma-separated output (-m)",
                        "i": "inode numbers (-i)",
                        "s": "block counts (-s)",
                    }.get(letter, f"the option -{letter}")
                    return _unsupported("ls", what, 2)
                else:
                    return _usage_error("ls", f"invalid option -- '{letter}'", 2)
            continue
        operands.append(arg)
    if options.all:
        options.almost_all = False
    return options, operands


def _extension(name: str) -> str:
    base = name.lstrip(".")
    return base.rpartition(".")[2] if "." in base else ""


def _sorted(items: list[tuple[str, _Info]], options: _LsOptions) -> list[tuple[str, _Info]]:
    if options.sort == "none":
        ordered = list(items)
    elif options.sort == "time":
        ordered = sorted(items, key=lambda item: (-item[1].mtime, item[0]))
    elif options.sort == "size":
        ordered = sorted(items, key=lambda item: (-item[1].shown_size, item[0]))
    elif options.sort == "extension":
        ordered = sorted(items, key=lambda item: (_extension(item[0]), item[0]))
    else:
        ordered = sorted(items, key=lambda item: item[0])
    if options.reverse and options.sort != "none":
        ordered.reverse()
    if options.group_directories_first:
        ordered.sort(key=lambda item: not item[1].is_directory)
    return ordered


def _indicator(info: _Info, options: _LsOptions) -> str:
    if info.is_directory:
        return "/" if options.classify or options.slash else ""
    if not options.classify:
        return ""
    if info.is_link:
        return "@"
    if info.is_file and info.mode & 0o111 and info.device is None:
        return "*"
    return ""


class _Clock:
    """``ls -l``'s dates in the shell's zone; "recent" as GNU ls judges it."""

    def __init__(self, zone: tzinfo, style: str) -> None:
        self.zone = zone
        self.style = style
        self.now = time.time_ns()

    def text(self, mtime: int) -> str:
        moment, nanos = _moment(mtime, self.zone)
        style = self.style
        if style.startswith("posix-"):
            style = style[len("posix-") :]
        if style == "full-iso":
            return format_time("%Y-%m-%d %H:%M:%S.%N %z", moment, nanos)
        if style == "long-iso":
            return format_time("%Y-%m-%d %H:%M", moment, nanos)
        recent = self.now - _SIX_MONTHS * 10**9 < mtime <= self.now
        if style.startswith("+"):
            formats = style[1:].split("\n", 1)
            chosen = formats[0] if recent or len(formats) == 1 else formats[1]
            return format_time(chosen, moment, nanos)
        if style == "iso":
            return format_time("%m-%d %H:%M" if recent else "%Y-%m-%d ", moment, nanos)
        return format_time("%b %e %H:%M" if recent else "%b %e  %Y", moment, nanos)


def _long_lines(
    rows: list[tuple[str, _Info]], options: _LsOptions, clock: _Clock, targets: dict[str, str]
) -> list[str]:
    cells: list[tuple[str, str, str, str, str, str, str]] = []
    for name, info in rows:
        owner, uid = info.owner
        group, gid = info.group
        device = info.device
        if device is not None:
            size = f"{device[0]}, {device[1]}"
        elif options.human:
            size = _human(info.shown_size)
        else:
            size = str(info.shown_size)
        shown = name + (_indicator(info, options) if not info.is_link else "")
        if info.is_link and info.target is not None:
            shown = f"{name} -> {info.target}{targets.get(name, '')}"
        cells.append(
            (
                _mode_text(info),
                str(info.links),
                str(uid) if options.numeric else owner,
                str(gid) if options.numeric else group,
                size,
                clock.text(info.mtime),
                shown,
            )
        )
    widths = [max((len(cell[column]) for cell in cells), default=0) for column in range(5)]
    lines: list[str] = []
    for mode, links, owner, group, size, when, shown in cells:
        parts = [mode, links.rjust(widths[1])]
        if options.owner:
            parts.append(owner.ljust(widths[2]))
        if options.group:
            parts.append(group.ljust(widths[3]))
        parts += [size.rjust(widths[4]), when, shown]
        lines.append(" ".join(parts))
    return lines


class _Ls:
    """``ls`` as GNU coreutils prints to a pipe: one name per line, ``-l`` with real modes,
    sizes, owners and modification times, ``.`` and ``..`` for ``-a``, nothing for an empty
    folder."""

    name = "ls"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        parsed = _ls_options(args)
        if isinstance(parsed, ExecResult):
            return parsed
        options, operands = parsed
        fs: Any = ctx.fs
        clock = _Clock(_zone(ctx), options.time_style)
        errors: list[str] = []
        files: list[tuple[str, _Info]] = []
        folders: list[tuple[str, _Info]] = []
        follow_operands = options.dereference or not (
            options.long or options.directory or options.classify
        )
        for operand in operands or ["."]:
            path = fs.resolve_path(ctx.cwd, operand)
            try:
                info = await _info(fs, path, follow=options.dereference)
                # "ls -l link-to-folder" lists the link, unless its name ends with "/"; a
                # dangling link is listed as itself.
                if info.is_link and (follow_operands or operand.endswith("/")):
                    with contextlib.suppress(OSError):
                        info = await _info(fs, path, follow=True)
            except OSError as error:
                errors.append(f"ls: cannot access '{operand}': {_reason(error)}\n")
                continue
            if info.is_directory and not options.directory:
                folders.append((operand, info))
            else:
                files.append((operand, info))
        out: list[str] = []
        if files:
            out.extend(await self._block(ctx, files, options, clock, None))
        show_names = len(operands) > 1 or options.recursive
        first = not files
        for operand, info in _sorted(folders, options):
            path = fs.resolve_path(ctx.cwd, operand)
            first = await self._folder(
                ctx, operand, path, info, options, clock, show_names, first, out, errors
            )
        stdout = "".join(line + "\n" for line in out)
        return _result(stdout, "".join(errors), 2 if errors else 0)

    async def _folder(
        self,
        ctx: CommandContext,
        shown: str,
        path: str,
        info: _Info,
        options: _LsOptions,
        clock: _Clock,
        show_name: bool,
        first: bool,
        out: list[str],
        errors: list[str],
    ) -> bool:
        fs: Any = ctx.fs
        if not first:
            out.append("")
        if show_name:
            out.append(f"{shown}:")
        try:
            entries: list[Any] = await fs.readdir_with_file_types(path)
        except OSError as error:
            errors.append(f"ls: cannot open directory '{shown}': {_reason(error)}\n")
            return False
        if not (options.all or options.almost_all):
            entries = [entry for entry in entries if not str(entry.name).startswith(".")]
        # A plain listing needs no more than the names and types the folder gives.
        detailed = (
            options.long
            or options.sort in ("time", "size")
            or options.classify
            or options.dereference
        )
        rows: list[tuple[str, _Info]] = []
        if options.all:
            parent = path.rpartition("/")[0] or "/"
            rows.append((".", info))
            rows.append(("..", await _info(fs, parent, follow=True, links_needed=options.long)))
        for entry in entries:
            name = str(entry.name)
            child = _join(path, name)
            if not detailed:
                light = _Info(
                    path=child,
                    is_file=bool(entry.is_file),
                    is_directory=bool(entry.is_directory),
                    is_link=bool(entry.is_symbolic_link),
                    mode=0,
                    size=0,
                    mtime=0,
                    links=1,
                )
                rows.append((name, light))
                continue
            try:
                found = await _info(
                    fs, child, follow=options.dereference, links_needed=options.long
                )
            except OSError:
                if not options.dereference:
                    raise
                found = await _info(fs, child, follow=False, links_needed=options.long)
            rows.append((name, found))
        rows = _sorted(rows, options)
        if options.long:
            total = sum(row[1].blocks_1k for row in rows)
            out.append(f"total {_human(total * 1024) if options.human else total}")
        out.extend(await self._block(ctx, rows, options, clock, path))
        if options.recursive:
            for name, child_info in rows:
                if name in (".", "..") or not child_info.is_directory or child_info.is_link:
                    continue
                child_shown = f"{shown.rstrip('/')}/{name}" if shown != "/" else f"/{name}"
                await self._folder(
                    ctx,
                    child_shown,
                    _join(path, name),
                    child_info,
                    options,
                    clock,
                    True,
                    False,
                    out,
                    errors,
                )
        return False

    async def _block(
        self,
        ctx: CommandContext,
        rows: list[tuple[str, _Info]],
        options: _LsOptions,
        clock: _Clock,
        folder: str | None,
    ) -> list[str]:
        rows = _sorted(rows, options) if folder is None else rows
        if not options.long:
            return [name + _indicator(info, options) for name, info in rows]
        targets: dict[str, str] = {}
        if options.classify:
            fs: Any = ctx.fs
            for name, info in rows:
                if info.is_link:
                    base = folder if folder is not None else ctx.cwd
                    try:
                        pointed = await _info(fs, fs.resolve_path(base, name), follow=True)
                    except OSError:
                        continue
                    targets[name] = _indicator(pointed, options)
        return _long_lines(rows, options, clock, targets)


def _reason(error: OSError) -> str:
    if isinstance(error, FileNotFoundError):
        return "No such file or directory"
    if isinstance(error, NotADirectoryError):
        return "Not a directory"
    if isinstance(error, PermissionError):
        return "Permission denied"
    text = str(error)
    if "ELOOP" in text:
        return "Too many levels of symbolic links"
    if error.strerror:
        return error.strerror
    return text or type(error).__name__


# -- stat -----------------------------------------------------------------------------------------

_STAT_DEFAULT = (
    "  File: %N\n"
    "  Size: %-10s\tBlocks: %-10b IO Block: %-6o %F\n"
    "Device: %Hd,%Ld\tInode: %-10i  Links: %h{device}\n"
    "Access: (%04a/%10.10A)  Uid: (%5u/%8U)   Gid: (%5g/%8G)\n"
    "Access: %x\n"
    "Modify: %y\n"
    "Change: %z\n"
    " Birth: %w\n"
)
_STAT_TERSE = "%n %s %b %f %u %g %D %i %h %t %T %X %Y %Z %W %o\n"
_STAT_SPEC = re.compile(r"%([-#+ 0]*)(\d*)(?:\.(\d+))?([HL]?[a-zA-Z%])")
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "a": "\a", "b": "\b", "r": "\r"}


def _file_type(info: _Info) -> str:
    if info.is_link:
        return "symbolic link"
    if info.is_directory:
        return "directory"
    if info.device is not None:
        return "character special file"
    return "regular file" if info.size else "regular empty file"


def _raw_mode(info: _Info) -> int:
    kind = {
        "l": stat_bits.S_IFLNK,
        "d": stat_bits.S_IFDIR,
        "c": stat_bits.S_IFCHR,
        "-": stat_bits.S_IFREG,
    }[info.type_char]
    return kind | info.mode


def _stat_field(letter: str, info: _Info, name: str, zone: tzinfo) -> str | int:
    moment, nanos = _moment(info.mtime, zone)
    stamp = format_time("%Y-%m-%d %H:%M:%S.%N %z", moment, nanos)
    seconds = info.mtime // 10**9
    device = info.device or (0, 0)
    values: dict[str, Callable[[], str | int]] = {
        "a": lambda: f"{info.mode:o}",
        "A": lambda: _mode_text(info),
        "b": lambda: info.blocks_1k * 2,
        "B": lambda: 512,
        "d": lambda: 0,
        "D": lambda: "0",
        "f": lambda: f"{_raw_mode(info):x}",
        "F": lambda: _file_type(info),
        "g": lambda: info.group[1],
        "G": lambda: info.group[0],
        "h": lambda: info.links,
        "i": lambda: 0,
        "m": lambda: "/",
        "n": lambda: name,
        "N": lambda: f"'{name}' -> '{info.target}'" if info.is_link else f"'{name}'",
        "o": lambda: 4096,
        "s": lambda: info.shown_size,
        "t": lambda: f"{device[0]:x}",
        "T": lambda: f"{device[1]:x}",
        "u": lambda: info.owner[1],
        "U": lambda: info.owner[0],
        "w": lambda: "-",
        "W": lambda: 0,
        "x": lambda: stamp,
        "X": lambda: seconds,
        "y": lambda: stamp,
        "Y": lambda: seconds,
        "z": lambda: stamp,
        "Z": lambda: seconds,
        "Hd": lambda: 0,
        "Ld": lambda: 0,
        "Hr": lambda: device[0],
        "Lr": lambda: device[1],
    }
    produce = values.get(letter)
    if produce is None:
        return "?"
    return produce()


def _stat_format(fmt: str, info: _Info, name: str, zone: tzinfo) -> str:
    def convert(match: re.Match[str]) -> str:
        flags, width, precision, letter = match.groups()
        if letter == "%":
            return "%"
        value = _stat_field(letter, info, name, zone)
        if letter in ("a",) and "0" in flags:
            text = f"{int(str(value), 8):0{width or 0}o}"
            return text
        text = str(value)
        if precision and letter in ("A",):
            text = text[: int(precision)]
        if not width:
            return text
        size = int(width)
        if "-" in flags:
            return text.ljust(size)
        if "0" in flags and isinstance(value, int):
            return text.rjust(size, "0")
        return text.rjust(size)

    return _STAT_SPEC.sub(convert, fmt)


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            following = text[index + 1]
            if following in _ESCAPES:
                out.append(_ESCAPES[following])
                index += 2
                continue
            octal = re.match(r"[0-7]{1,3}", text[index + 1 :])
            if octal is not None:
                out.append(chr(int(octal.group(0), 8)))
                index += 1 + len(octal.group(0))
                continue
        out.append(char)
        index += 1
    return "".join(out)


class _Stat:
    """``stat`` as GNU coreutils prints it (``-c``, ``--printf``, ``-L``, ``-t``); a link is
    shown as itself unless ``-L``. The in-memory filesystem has no devices or inode numbers
    (0), one time per entry (access, modify and change times are the modification time) and
    no birth time (``-``)."""

    name = "stat"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        fmt: str | None = None
        follow = False
        terse = False
        operands: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            index += 1
            if arg == "--":
                operands.extend(args[index:])
                break
            if arg in ("-c", "--format", "--printf"):
                if index >= len(args):
                    return _usage_error("stat", f"option requires an argument -- '{arg[-1]}'")
                value = args[index]
                index += 1
                fmt = _unescape(value) if arg == "--printf" else value + "\n"
            elif arg.startswith("--format="):
                fmt = arg[len("--format=") :] + "\n"
            elif arg.startswith("--printf="):
                fmt = _unescape(arg[len("--printf=") :])
            elif arg.startswith("-c") and len(arg) > 2:
                fmt = arg[2:] + "\n"
            elif arg in ("-L", "--dereference"):
                follow = True
            elif arg in ("-t", "--terse"):
                terse = True
            elif arg in ("-f", "--file-system"):
                return _unsupported("stat", "file system status (-f)")
            elif arg.startswith("-") and arg != "-":
                return _usage_error("stat", f"invalid option -- '{arg[1:2]}'")
            else:
                operands.append(arg)
        if not operands:
            return _usage_error("stat", "missing operand")
        fs: Any = ctx.fs
        zone = _zone(ctx)
        out: list[str] = []
        errors: list[str] = []
        for operand in operands:
            path = fs.resolve_path(ctx.cwd, operand)
            try:
                info = await _info(fs, path, follow=follow)
            except OSError as error:
                errors.append(f"stat: cannot statx '{operand}': {_reason(error)}\n")
                continue
            if fmt is not None:
                chosen = fmt
            elif terse:
                chosen = _STAT_TERSE
            else:
                device = info.device
                chosen = _STAT_DEFAULT.replace(
                    "{device}", f"     Device type: {device[0]},{device[1]}" if device else ""
                )
                if info.is_link:
                    chosen = chosen.replace("  File: %N", f"  File: %n -> {info.target}")
                else:
                    chosen = chosen.replace("  File: %N", "  File: %n")
            out.append(_stat_format(chosen, info, operand, zone))
        return _result("".join(out), "".join(errors), 1 if errors else 0)


# -- touch, cp -p, head -c of /dev/zero ---------------------------------------------------------------


def _touch_stamp(text: str, zone: tzinfo) -> int:
    """``touch -t [[CC]YY]MMDDhhmm[.ss]`` as nanoseconds since the epoch."""
    match = re.fullmatch(r"(\d{2,4})?(\d{2})(\d{2})(\d{2})(\d{2})(?:\.(\d{2}))?", text)
    if match is None or (match[1] is not None and len(match[1]) == 3):
        raise DateError(text)
    now = datetime.now(zone)
    if match[1] is None:
        year = now.year
    elif len(match[1]) == 2:
        short = int(match[1])
        year = short + (1900 if short >= 69 else 2000)
    else:
        year = int(match[1])
    try:
        wall = datetime(
            year, int(match[2]), int(match[3]), int(match[4]), int(match[5]), int(match[6] or 0)
        )
    except ValueError:
        raise DateError(text) from None
    return calendar.timegm(wall.replace(tzinfo=zone).utctimetuple()) * 10**9


class _Touch:
    """``touch`` with GNU's ``-d`` dates, ``-t`` stamps, ``-r`` reference files, ``-a``/``-m``
    (the in-memory filesystem keeps one time: ``-a`` alone changes nothing) and ``-c``."""

    name = "touch"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        fs: Any = ctx.fs
        zone = _zone(ctx)
        stamp: int | None = None
        no_create = False
        access_only = False
        files: list[str] = []
        index = 0

        def value_of(flag: str) -> str | None:
            nonlocal index
            if index >= len(args):
                return None
            index += 1
            return args[index - 1]

        while index < len(args):
            arg = args[index]
            index += 1
            if arg == "--":
                files.extend(args[index:])
                break
            name, equals, inline = arg.partition("=")
            if arg.startswith("--"):
                if name in ("--date", "--reference") or arg == "--no-create" or arg == "--time":
                    pass
                else:
                    return _usage_error("touch", f"unrecognized option '{arg}'")
                if arg == "--no-create":
                    no_create = True
                    continue
                value = inline if equals else value_of(name)
                if value is None:
                    return _usage_error("touch", f"option '{name}' requires an argument")
                letter = {"--date": "d", "--reference": "r", "--time": "T"}[name]
            elif arg.startswith("-") and arg != "-":
                letters = arg[1:]
                letter = ""
                value = None
                for position, flag in enumerate(letters):
                    if flag in "drt":
                        letter = flag
                        value = letters[position + 1 :] or value_of(flag)
                        if value is None:
                            return _usage_error("touch", f"option requires an argument -- '{flag}'")
                        break
                    if flag == "c":
                        no_create = True
                    elif flag == "a":
                        access_only = True
                    elif flag in "mf":
                        access_only = False
                    elif flag == "h":
                        return _unsupported("touch", "changing a link's own time (-h)")
                    else:
                        return _usage_error("touch", f"invalid option -- '{flag}'")
                if not letter:
                    continue
            else:
                files.append(arg)
                continue
            assert value is not None
            try:
                if letter == "d":
                    stamp = parse_date(value, zone)
                elif letter == "t":
                    stamp = _touch_stamp(value, zone)
                elif letter == "r":
                    st: Any = await fs.stat(fs.resolve_path(ctx.cwd, value))
                    stamp = _time_of(float(st.mtime))
                elif value not in ("modify", "mtime"):
                    access_only = True
            except DateError:
                return _result(stderr=f"touch: invalid date format '{value}'\n", exit_code=1)
            except OSError as error:
                return _result(
                    stderr=f"touch: failed to get attributes of '{value}': {_reason(error)}\n",
                    exit_code=1,
                )
        if not files:
            return _usage_error("touch", "missing file operand")
        errors: list[str] = []
        seconds = (time.time_ns() if stamp is None else stamp) / 10**9
        for name in files:
            path = fs.resolve_path(ctx.cwd, name)
            try:
                if not await fs.exists(path):
                    if no_create:
                        continue
                    await fs.write_file(path, b"")
                    if stamp is None:
                        continue
                if not access_only:
                    await fs.utimes(path, seconds, seconds)
            except OSError as error:
                errors.append(f"touch: cannot touch '{name}': {_reason(error)}\n")
        return _result("", "".join(errors), 1 if errors else 0)


class _CpPreserving:
    """``cp -p``/``-a``/``--preserve``: just-bash's copy, then the sources' modes and
    modification times set on the copies (deepest first, so copying a folder's contents does
    not change the folder's time afterwards)."""

    name = "cp"

    def __init__(self, inner: Command) -> None:
        self._inner = inner

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        preserve = False
        passed: list[str] = []
        operands: list[str] = []
        options_done = False
        for arg in args:
            if options_done or arg == "-" or not arg.startswith("-"):
                operands.append(arg)
                passed.append(arg)
            elif arg == "--":
                options_done = True
                passed.append(arg)
            elif arg in ("--archive",) or arg.startswith("--preserve"):
                preserve = True
                if arg == "--archive":
                    passed.append("-r")
            elif arg.startswith("--"):
                passed.append(arg)
            else:
                letters = arg[1:]
                if "a" in letters:
                    preserve = True
                    letters = letters.replace("a", "r")
                if "p" in letters:
                    preserve = True
                    letters = letters.replace("p", "")
                letters = letters.replace("d", "").replace("P", "")
                if letters:
                    passed.append("-" + letters)
        if not preserve:
            return await self._inner.execute(args, ctx)
        fs: Any = ctx.fs
        pairs: list[tuple[str, str]] = []
        if len(operands) >= 2:
            destination = fs.resolve_path(ctx.cwd, operands[-1])
            into = len(operands) > 2 or await fs.is_directory(destination)
            for source in operands[:-1]:
                source_path = fs.resolve_path(ctx.cwd, source)
                base = source_path.rpartition("/")[2]
                pairs.append((source_path, _join(destination, base) if into else destination))
        result = await self._inner.execute(passed, ctx)
        for source, target in pairs:
            await _copy_metadata(fs, source, target)
        return result


async def _copy_metadata(fs: Any, source: str, target: str) -> None:
    try:
        if not await fs.exists(target):
            return
        st: Any = await fs.stat(source)
    except OSError:
        return
    if st.is_directory:
        for entry in await fs.readdir_with_file_types(source):
            child_source = _join(source, str(entry.name))
            if entry.is_symbolic_link:
                continue
            await _copy_metadata(fs, child_source, _join(target, str(entry.name)))
    await fs.chmod(target, int(st.mode) & 0o7777)
    await fs.utimes(target, float(st.mtime), float(st.mtime))


_SIZE_SUFFIXES = {
    "": 1,
    "b": 512,
    "k": 1024,
    "K": 1024,
    "KiB": 1024,
    "kB": 1000,
    "KB": 1000,
    "M": 1024**2,
    "MiB": 1024**2,
    "MB": 1000**2,
    "G": 1024**3,
    "GiB": 1024**3,
    "GB": 1000**3,
}


def _byte_count(text: str) -> int | None:
    match = re.fullmatch(r"(\d+)([a-zA-Z]*)", text)
    if match is None or match[2] not in _SIZE_SUFFIXES:
        return None
    return int(match[1]) * _SIZE_SUFFIXES[match[2]]


class _HeadOfDevices:
    """``head -c N /dev/zero`` (and of ``/dev/null``): the device's bytes, which a read of the
    whole file cannot give (``/dev/zero`` has no end); other operands go to just-bash's head."""

    name = "head"

    def __init__(self, inner: Command) -> None:
        self._inner = inner

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        fs: Any = ctx.fs
        count: int | None = None
        options: list[str] = []
        files: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            index += 1
            if arg in ("-c", "--bytes") and index < len(args):
                count = _byte_count(args[index])
                options += [arg, args[index]]
                index += 1
                continue
            if arg.startswith("--bytes="):
                count = _byte_count(arg[len("--bytes=") :])
            elif arg.startswith("-c") and len(arg) > 2:
                count = _byte_count(arg[2:])
            if arg.startswith("-") and arg != "-":
                options.append(arg)
                if arg in ("-n", "--lines") and index < len(args):
                    options.append(args[index])
                    index += 1
            else:
                files.append(arg)
        paths = [fs.resolve_path(ctx.cwd, name) for name in files]
        devices = [path for path in paths if path in DEVICES]
        if not devices:
            return await self._inner.execute(args, ctx)
        if count is None:
            return _result(
                stderr="head: only 'head -c N' can read /dev/zero in the in-memory shell "
                "(it reads files whole, and /dev/zero has no end)\n",
                exit_code=1,
            )
        parts: list[str] = []
        errors: list[str] = []
        status = 0
        for position, (name, path) in enumerate(zip(files, paths, strict=True)):
            if len(files) > 1:
                parts.append(("\n" if position else "") + f"==> {name} <==\n")
            if path == "/dev/zero":
                parts.append("\0" * count)
            elif path in DEVICES:
                continue
            else:
                single = await self._inner.execute([*options, name], ctx)
                parts.append(single.stdout)
                errors.append(single.stderr)
                status = status or single.exit_code
        return _result("".join(parts), "".join(errors), status)


# -- realpath --------------------------------------------------------------------------------------

_MAX_LINKS = 40


async def _canonical(fs: Any, path: str, mode: str, follow: bool) -> str:
    """``path`` (absolute) with links followed and ``.``/``..`` resolved component by component,
    as ``realpath`` does: ``mode`` "e" needs every component, "E" all but the last, "m" none."""
    pending = [part for part in reversed(path.split("/")) if part not in ("", ".")]
    resolved = "/"
    links = 0
    while pending:
        name = pending.pop()
        if name == "..":
            resolved = resolved.rpartition("/")[0] or "/"
            continue
        candidate = _join(resolved, name)
        last = not pending
        try:
            st: Any = await fs.lstat(candidate)
        except FileNotFoundError:
            if mode == "m" or (mode == "E" and last):
                resolved = candidate
                continue
            raise
        if st.is_symbolic_link and follow:
            links += 1
            if links > _MAX_LINKS:
                raise OSError("ELOOP")
            target = str(await fs.readlink(candidate))
            if target.startswith("/"):
                resolved = "/"
            pending.extend(part for part in reversed(target.split("/")) if part not in ("", "."))
            continue
        if not last and not st.is_directory and not st.is_symbolic_link and mode != "m":
            raise NotADirectoryError(candidate)
        resolved = candidate
    return resolved


class _Realpath:
    """``realpath`` as GNU's (``-e``, ``-m``, ``-s``, ``-q``, ``-z``, ``--relative-to``,
    ``--relative-base``), resolving links through the sandbox's filesystem."""

    name = "realpath"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        mode, follow, quiet, end = "E", True, False, "\n"
        relative_to: str | None = None
        relative_base: str | None = None
        operands: list[str] = []
        options_done = False
        for arg in args:
            if options_done or not arg.startswith("-") or arg == "-":
                operands.append(arg)
            elif arg == "--":
                options_done = True
            elif arg.startswith("--relative-to="):
                relative_to = arg[len("--relative-to=") :]
            elif arg.startswith("--relative-base="):
                relative_base = arg[len("--relative-base=") :]
            elif arg.startswith("--"):
                long_letters = {
                    "--canonicalize-existing": "e",
                    "--canonicalize-missing": "m",
                    "--strip": "s",
                    "--no-symlinks": "s",
                    "--quiet": "q",
                    "--zero": "z",
                    "--logical": "L",
                    "--physical": "P",
                }
                if arg not in long_letters:
                    return _usage_error("realpath", f"unrecognized option '{arg}'")
                letters = long_letters[arg]
                mode, follow, quiet, end = _realpath_flags(letters, mode, follow, quiet, end)
            else:
                if any(letter not in "emsqzLPE" for letter in arg[1:]):
                    bad = next(letter for letter in arg[1:] if letter not in "emsqzLPE")
                    return _usage_error("realpath", f"invalid option -- '{bad}'")
                mode, follow, quiet, end = _realpath_flags(arg[1:], mode, follow, quiet, end)
        if not operands:
            return _usage_error("realpath", "missing operand")
        fs: Any = ctx.fs
        bases: list[str | None] = []
        for base in (relative_to, relative_base):
            if base is None:
                bases.append(None)
                continue
            try:
                bases.append(await _canonical(fs, fs.resolve_path(ctx.cwd, base), mode, follow))
            except OSError as error:
                return _result(stderr=f"realpath: {base}: {_reason(error)}\n", exit_code=1)
        to, base = bases
        out: list[str] = []
        errors: list[str] = []
        failed = False
        for operand in operands:
            absolute = operand if operand.startswith("/") else f"{ctx.cwd.rstrip('/')}/{operand}"
            try:
                found = await _canonical(fs, absolute, mode, follow)
            except OSError as error:
                failed = True
                if not quiet:
                    errors.append(f"realpath: {operand}: {_reason(error)}\n")
                continue
            if to is not None and (base is None or (_under(found, base) and _under(to, base))):
                found = posixpath.relpath(found, to)
            elif base is not None and _under(found, base):
                found = posixpath.relpath(found, base)
            out.append(found + end)
        return _result("".join(out), "".join(errors), 1 if failed else 0)


def _realpath_flags(
    letters: str, mode: str, follow: bool, quiet: bool, end: str
) -> tuple[str, bool, bool, str]:
    for letter in letters:
        if letter in "emE":
            mode = letter
        elif letter == "s":
            follow = False
        elif letter == "q":
            quiet = True
        elif letter == "z":
            end = "\0"
        elif letter in "LP":
            follow = True  # "..": after links (-P) and before them (-L) agree without links
    return mode, follow, quiet, end


def _under(path: str, base: str) -> bool:
    return base == "/" or path == base or path.startswith(base + "/")


# -- identity: uname, id, whoami, hostname ----------------------------------------------------------

_UNAME_LONG = {
    "--all": "a",
    "--kernel-name": "s",
    "--nodename": "n",
    "--kernel-release": "r",
    "--kernel-version": "v",
    "--machine": "m",
    "--processor": "p",
    "--hardware-platform": "i",
    "--operating-system": "o",
}


class _Uname:
    """``uname``: a fixed Linux identity (:data:`UNAME`) and the instance's host name."""

    name = "uname"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        wanted: set[str] = set()
        for arg in args:
            if arg in _UNAME_LONG:
                wanted.add(_UNAME_LONG[arg])
            elif arg.startswith("--"):
                return _usage_error("uname", f"unrecognized option '{arg}'")
            elif arg.startswith("-") and len(arg) > 1:
                for letter in arg[1:]:
                    if letter not in "asnrvmpio":
                        return _usage_error("uname", f"invalid option -- '{letter}'")
                    wanted.add(letter)
            else:
                return _usage_error("uname", f"extra operand '{arg}'")
        fields = {**UNAME, "n": _hostname[0]}
        if "a" in wanted:
            wanted |= set("snrvmo")
            wanted |= {letter for letter in "pi" if fields[letter] != "unknown"}
        if not wanted:
            wanted = {"s"}
        return _result(" ".join(fields[letter] for letter in "snrvmpio" if letter in wanted) + "\n")


_USERS = {USER: (UID, GROUP, GID), "root": (0, "root", 0)}


class _Id:
    """``id``: the sandbox's user ``user`` (1000) in group ``user`` (1000); ``root`` is known."""

    name = "id"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        only = ""
        names = False
        operands: list[str] = []
        for arg in args:
            if arg in ("--user", "--group", "--groups"):
                only += {"--user": "u", "--group": "g", "--groups": "G"}[arg]
            elif arg == "--name":
                names = True
            elif arg in ("--real", "--zero") or arg.startswith("--context"):
                return _unsupported("id", f"the option {arg}")
            elif arg.startswith("--"):
                return _usage_error("id", f"unrecognized option '{arg}'")
            elif arg.startswith("-") and len(arg) > 1:
                for letter in arg[1:]:
                    if letter in "ugG":
                        only += letter
                    elif letter == "n":
                        names = True
                    elif letter in "ar":
                        pass  # -a: ignored by GNU too; -r: real and effective ids are the same
                    elif letter in "zZ":
                        return _unsupported("id", f"the option -{letter}")
                    else:
                        return _usage_error("id", f"invalid option -- '{letter}'")
            else:
                operands.append(arg)
        if len(set(only)) > 1:
            return _result(stderr='id: cannot print "only" of more than one choice\n', exit_code=1)
        if names and not only:
            return _result(
                stderr="id: cannot print only names or real IDs in default format\n", exit_code=1
            )
        if len(operands) > 1:
            return _usage_error("id", f"extra operand '{operands[1]}'")
        user = operands[0] if operands else USER
        if user not in _USERS:
            return _result(stderr=f"id: '{user}': no such user\n", exit_code=1)
        uid, group, gid = _USERS[user]
        if only == "u":
            return _result(f"{user if names else uid}\n")
        if only in ("g", "G"):
            return _result(f"{group if names else gid}\n")
        return _result(f"uid={uid}({user}) gid={gid}({group}) groups={gid}({group})\n")


class _Whoami:
    """``whoami``: the sandbox's user (the same as ``id -un`` and ``$USER``)."""

    name = "whoami"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        if args:
            return _usage_error("whoami", f"extra operand '{args[0]}'")
        return _result(f"{USER}\n")


class _Hostname:
    """``hostname``: the instance's host name (set per command by the worker); it cannot be set."""

    name = "hostname"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        name = _hostname[0]
        for arg in args:
            if arg in ("-s", "--short", "-f", "--fqdn", "--long", "-A", "--all-fqdns"):
                continue
            if arg in ("-d", "--domain", "-y", "--yp", "--nis"):
                return _result("\n")
            if arg in ("-i", "--ip-address", "-I", "--all-ip-addresses"):
                return _unsupported("hostname", "network addresses (the sandbox has no network)")
            if arg.startswith("-"):
                return _result(stderr=f"hostname: invalid option -- '{arg[1:2]}'\n", exit_code=1)
            return _result(
                stderr="hostname: you must be root to change the host name\n", exit_code=1
            )
        return _result(f"{name}\n")


# -- mktemp -----------------------------------------------------------------------------------------

_TEMP_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


class _Mktemp:
    """``mktemp``: a new file (mode 600) or folder (``-d``, mode 700) in the sandbox's
    filesystem, from a template whose trailing ``X``s become random letters and digits."""

    name = "mktemp"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        folder = dry_run = quiet = under_tmp = False
        directory: str | None = None
        suffix: str | None = None
        templates: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            index += 1
            if arg in ("-d", "--directory"):
                folder = True
            elif arg in ("-u", "--dry-run"):
                dry_run = True
            elif arg in ("-q", "--quiet"):
                quiet = True
            elif arg == "-t":
                under_tmp = True
            elif arg == "-p":
                if index >= len(args):
                    return _usage_error("mktemp", "option requires an argument -- 'p'")
                directory = args[index]
                index += 1
            elif arg.startswith("-p") and not arg.startswith("--"):
                directory = arg[2:]
            elif arg == "--tmpdir":
                directory = ""
            elif arg.startswith("--tmpdir="):
                directory = arg[len("--tmpdir=") :]
            elif arg.startswith("--suffix="):
                suffix = arg[len("--suffix=") :]
            elif arg == "--":
                templates.extend(args[index:])
                break
            elif arg.startswith("-") and len(arg) > 1:
                bundled = arg[1:]
                if all(letter in "duqt" for letter in bundled):
                    folder = folder or "d" in bundled
                    dry_run = dry_run or "u" in bundled
                    quiet = quiet or "q" in bundled
                    under_tmp = under_tmp or "t" in bundled
                    continue
                return _usage_error("mktemp", f"invalid option -- '{bundled[0]}'")
            else:
                templates.append(arg)
        if len(templates) > 1:
            return _usage_error("mktemp", "too many templates")
        tmpdir = ctx.env.get("TMPDIR") or ""
        if templates:
            template = templates[0]
            if under_tmp or directory is not None:
                if "/" in template:
                    return _result(
                        stderr=f"mktemp: invalid template, '{template}', contains directory "
                        "separator\n",
                        exit_code=1,
                    )
                base = (
                    (tmpdir or directory or "/tmp")
                    if under_tmp
                    else (directory or tmpdir or "/tmp")
                )
                template = (
                    f"{base.rstrip('/') or '/'}/{template}" if base != "/" else f"/{template}"
                )
        else:
            base = directory or tmpdir or "/tmp"
            template = f"{base.rstrip('/')}/tmp.XXXXXXXXXX"
        name_part = template.rpartition("/")[2]
        if suffix is None:
            stem = name_part.rstrip("X")
            if len(name_part) - len(stem) < 3:
                last = name_part.rfind("X")
                run_end = last + 1
                run_start = run_end
                while run_start > 0 and name_part[run_start - 1] == "X":
                    run_start -= 1
                if last < 0 or run_end - run_start < 3:
                    return _result(
                        stderr=f"mktemp: too few X's in template '{templates[0] if templates else template}'\n",
                        exit_code=1,
                    )
                suffix = name_part[run_end:]
                template = template[: len(template) - len(suffix)]
        elif not template.endswith("X"):
            return _result(
                stderr=f"mktemp: with --suffix, template '{template}' must end in X\n", exit_code=1
            )
        suffix = suffix or ""
        xs = len(template) - len(template.rstrip("X"))
        if xs < 3:
            return _result(stderr=f"mktemp: too few X's in template '{template}'\n", exit_code=1)
        fs: Any = ctx.fs
        prefix = template[: len(template) - xs]
        for _ in range(100):
            candidate = prefix + "".join(secrets.choice(_TEMP_LETTERS) for _ in range(xs)) + suffix
            path = fs.resolve_path(ctx.cwd, candidate)
            try:
                if await fs.exists(path):
                    continue
                if dry_run:
                    return _result(candidate + "\n")
                parent = path.rpartition("/")[0] or "/"
                if not await fs.is_directory(parent):
                    raise FileNotFoundError(parent)
                if folder:
                    await fs.mkdir(path)
                    await fs.chmod(path, 0o700)
                else:
                    await fs.write_file(path, b"")
                    await fs.chmod(path, 0o600)
            except OSError as error:
                what = "directory" if folder else "file"
                shown = template + suffix
                message = (
                    f"mktemp: failed to create {what} via template '{shown}': {_reason(error)}\n"
                )
                return _result(stderr="" if quiet else message, exit_code=1)
            return _result(candidate + "\n")
        return _result(
            stderr="" if quiet else f"mktemp: failed to create a unique name from '{template}'\n",
            exit_code=1,
        )


# -- date -------------------------------------------------------------------------------------------

_ISO_FORMATS = {
    "date": "%Y-%m-%d",
    "hours": "%Y-%m-%dT%H%:z",
    "minutes": "%Y-%m-%dT%H:%M%:z",
    "seconds": "%Y-%m-%dT%H:%M:%S%:z",
    "ns": "%Y-%m-%dT%H:%M:%S,%N%:z",
}
_RFC_3339 = {
    "date": "%Y-%m-%d",
    "seconds": "%Y-%m-%d %H:%M:%S%:z",
    "ns": "%Y-%m-%d %H:%M:%S.%N%:z",
}


class _Date:
    """``date`` with GNU's ``-d`` strings (see ``_DATE_FORMS``), ``-u``, ``-r FILE``, ``-I``,
    ``-R``, ``--rfc-3339`` and ``+FORMAT``, in the shell's ``TZ`` (``_zones``)."""

    name = "date"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        utc = False
        given: str | None = None
        reference: str | None = None
        fmt: str | None = None
        options: list[tuple[str, str | None]] = []  # (long name, value)
        short = {"d": "--date", "r": "--reference", "s": "--set", "f": "--file", "I": "--iso-8601"}
        index = 0
        while index < len(args):
            arg = args[index]
            index += 1
            if arg.startswith("+"):
                if fmt is not None:
                    return _usage_error("date", f"extra operand '{arg}'")
                fmt = arg[1:]
            elif arg.startswith("--"):
                name, equals, inline = arg.partition("=")
                value: str | None = inline if equals else None
                if value is None and name in ("--date", "--reference", "--set", "--file"):
                    if index >= len(args):
                        return _usage_error("date", f"option '{name}' requires an argument")
                    value = args[index]
                    index += 1
                options.append((name, value))
            elif arg.startswith("-") and len(arg) > 1:
                letters = arg[1:]
                for position, letter in enumerate(letters):
                    rest = letters[position + 1 :]
                    if letter in "uR":
                        options.append(({"u": "--utc", "R": "--rfc-email"}[letter], None))
                    elif letter == "I":
                        options.append(("--iso-8601", rest or None))
                        break
                    elif letter in short:
                        if not rest and index >= len(args):
                            return _usage_error(
                                "date", f"option requires an argument -- '{letter}'"
                            )
                        if not rest:
                            rest = args[index]
                            index += 1
                        options.append((short[letter], rest))
                        break
                    else:
                        return _usage_error("date", f"invalid option -- '{letter}'")
            else:
                return _result(stderr=f"date: invalid date '{arg}'\n", exit_code=1)
        for name, value in options:
            if name in ("--utc", "--universal"):
                utc = True
            elif name == "--date":
                given = value
            elif name == "--reference":
                reference = value
            elif name == "--iso-8601":
                spec = value or "date"
                if spec not in _ISO_FORMATS:
                    return _usage_error("date", f"invalid argument '{spec}' for '--iso-8601'")
                fmt = _ISO_FORMATS[spec]
            elif name == "--rfc-3339":
                if value not in _RFC_3339:
                    return _usage_error("date", f"invalid argument '{value}' for '--rfc-3339'")
                fmt = _RFC_3339[value]
            elif name in ("--rfc-email", "--rfc-2822"):
                fmt = "%a, %d %b %Y %H:%M:%S %z"
            elif name == "--set":
                return _result(
                    stderr="date: cannot set date: Operation not permitted\n", exit_code=1
                )
            elif name == "--file":
                return _unsupported("date", "reading dates from a file (-f)")
            else:
                return _usage_error("date", f"unrecognized option '{name}'")
        zone = _zone(ctx, utc)
        if given is not None:
            try:
                moment_ns = parse_date(given, zone)
            except DateError:
                return _result(
                    stderr=f"date: invalid date '{given}'\n"
                    f"date: the in-memory shell (pai-sandbox-inmemory) reads {_DATE_FORMS}\n",
                    exit_code=1,
                )
        elif reference is not None:
            fs: Any = ctx.fs
            try:
                st: Any = await fs.stat(fs.resolve_path(ctx.cwd, reference))
            except OSError as error:
                return _result(stderr=f"date: {reference}: {_reason(error)}\n", exit_code=1)
            moment_ns = _time_of(float(st.mtime))
        else:
            moment_ns = time.time_ns()
        try:
            moment, nanos = _moment(moment_ns, zone)
        except (OverflowError, ValueError, OSError):
            return _result(stderr=f"date: time {moment_ns // 10**9} is out of range\n", exit_code=1)
        return _result(format_time(fmt or "%a %b %e %H:%M:%S %Z %Y", moment, nanos) + "\n")


# -- paste ------------------------------------------------------------------------------------------


class _DelimiterError(ValueError):
    pass


def _delimiters(text: str) -> list[str]:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 == len(text):
            raise _DelimiterError(f"delimiter list ends with an unescaped backslash: {text}")
        if char == "\\" and index + 1 < len(text):
            following = text[index + 1]
            out.append(
                {"n": "\n", "t": "\t", "\\": "\\", "0": "", "b": "\b"}.get(following, following)
            )
            index += 2
            continue
        out.append(char)
        index += 1
    return out or [""]


class _Paste:
    """``paste`` as GNU's: stdin without operands (or for each ``-``), ``-s``, ``-d LIST`` with
    its escapes and cycling, ``-z``."""

    name = "paste"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        try:
            return await self._paste(args, ctx)
        except _DelimiterError as error:
            return _result(stderr=f"paste: {error}\n", exit_code=1)

    async def _paste(self, args: list[str], ctx: CommandContext) -> ExecResult:
        delimiters = ["\t"]
        serial = False
        end = "\n"
        files: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            index += 1
            if arg == "--":
                files.extend(args[index:])
                break
            if arg in ("-d", "--delimiters"):
                if index >= len(args):
                    return _usage_error("paste", "option requires an argument -- 'd'")
                delimiters = _delimiters(args[index])
                index += 1
            elif arg.startswith("--delimiters="):
                delimiters = _delimiters(arg[len("--delimiters=") :])
            elif arg == "--serial":
                serial = True
            elif arg == "--zero-terminated":
                end = "\0"
            elif arg.startswith("--"):
                return _usage_error("paste", f"unrecognized option '{arg}'")
            elif arg.startswith("-") and arg != "-":
                letters = arg[1:]
                for position, letter in enumerate(letters):
                    if letter == "s":
                        serial = True
                    elif letter == "z":
                        end = "\0"
                    elif letter == "d":
                        rest = letters[position + 1 :]
                        if rest:
                            delimiters = _delimiters(rest)
                        elif index < len(args):
                            delimiters = _delimiters(args[index])
                            index += 1
                        else:
                            return _usage_error("paste", "option requires an argument -- 'd'")
                        break
                    else:
                        return _usage_error("paste", f"invalid option -- '{letter}'")
            else:
                files.append(arg)
        fs: Any = ctx.fs
        stdin_lines = _lines(ctx.stdin, end)
        stdin_position = [0]
        columns: list[list[str] | None] = []  # None: stdin, read in turn
        for name in files or ["-"]:
            if name == "-":
                columns.append(None)
                continue
            try:
                columns.append(_lines(await fs.read_file(fs.resolve_path(ctx.cwd, name)), end))
            except OSError as error:
                return _result(stderr=f"paste: {name}: {_reason(error)}\n", exit_code=1)
        out: list[str] = []
        if serial:
            for column in columns:
                lines = column if column is not None else stdin_lines[stdin_position[0] :]
                if column is None:
                    stdin_position[0] = len(stdin_lines)
                joined = "".join(
                    (delimiters[(number - 1) % len(delimiters)] if number else "") + line
                    for number, line in enumerate(lines)
                )
                out.append(joined + end)
            return _result("".join(out))
        positions = [0] * len(columns)
        while True:
            fields: list[str] = []
            any_left = False
            for number, column in enumerate(columns):
                if column is None:
                    if stdin_position[0] < len(stdin_lines):
                        fields.append(stdin_lines[stdin_position[0]])
                        stdin_position[0] += 1
                        any_left = True
                    else:
                        fields.append("")
                elif positions[number] < len(column):
                    fields.append(column[positions[number]])
                    positions[number] += 1
                    any_left = True
                else:
                    fields.append("")
            if not any_left:
                break
            line = fields[0]
            for number, value in enumerate(fields[1:]):
                line += delimiters[number % len(delimiters)] + value
            out.append(line + end)
        return _result("".join(out))


def _lines(text: str, end: str = "\n") -> list[str]:
    if not text:
        return []
    lines = text.split(end)
    if lines[-1] == "":
        lines.pop()
    return lines


# -- xargs ------------------------------------------------------------------------------------------

_XARGS_DEFAULT_SIZE = 131072  # GNU's default -s on Linux


class _XargsInputError(ValueError):
    pass


def _xargs_items(text: str, eof: str | None) -> list[str]:
    """Items of xargs' default input syntax: blanks separate, quotes and backslashes escape."""
    items: list[str] = []
    current: list[str] = []
    started = False
    index = 0
    while index < len(text):
        char = text[index]
        if char in "'\"":
            close = text.find(char, index + 1)
            newline = text.find("\n", index + 1)
            if close < 0 or (0 <= newline < close):
                kind = "single" if char == "'" else "double"
                raise _XargsInputError(
                    f"unmatched {kind} quote; by default quotes are special to xargs unless you "
                    "use the -0 option"
                )
            current.append(text[index + 1 : close])
            started = True
            index = close + 1
            continue
        if char == "\\" and index + 1 < len(text):
            current.append(text[index + 1])
            started = True
            index += 2
            continue
        if char in " \t\n":
            if started:
                item = "".join(current)
                if eof is not None and item == eof:
                    return items
                items.append(item)
                current, started = [], False
            index += 1
            continue
        current.append(char)
        started = True
        index += 1
    if started:
        item = "".join(current)
        if eof is None or item != eof:
            items.append(item)
    return items


def _xargs_lines(text: str, strip: bool) -> list[list[str]]:
    """Input as lines (``-L``/``-I``); a line ending in a blank continues on the next."""
    groups: list[list[str]] = []
    pending: list[str] = []
    for raw in text.split("\n"):
        line = raw.lstrip(" \t") if strip else raw
        if not line.strip():
            continue
        pending.extend(_xargs_items(line, None))
        if not raw.endswith((" ", "\t")):
            groups.append(pending)
            pending = []
    if pending:
        groups.append(pending)
    return groups


def _xargs_replace_line(raw: str) -> str:
    """An ``-I`` input line: leading blanks dropped, quotes and backslashes still read."""
    line = raw.lstrip(" \t")
    items = _xargs_items(line.replace(" ", "\0").replace("\t", "\1"), None)
    return " ".join(items).replace("\0", " ").replace("\1", "\t")


def _shell_word(text: str) -> str:
    if text and re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _escape_delimiter(text: str) -> str | None:
    if len(text) == 1:
        return text
    simple = {"\\n": "\n", "\\t": "\t", "\\0": "\0", "\\\\": "\\", "\\r": "\r"}
    if text in simple:
        return simple[text]
    match = re.fullmatch(r"\\x([0-9a-fA-F]{2})|\\([0-7]{1,3})", text)
    if match is not None:
        return chr(int(match[1], 16)) if match[1] else chr(int(match[2], 8))
    return None


class _Xargs:
    """``xargs`` as GNU's: ``-n``, ``-L``, ``-I``/``-i``, ``-0``, ``-d``, ``-r``, ``-t``, ``-E``,
    ``-s``, ``-x``, ``-a``; quotes and backslashes in the default input syntax; exit codes 123,
    124, 126 and 127. Commands run one after another (``-P`` is accepted and runs them in turn);
    each runs in the same in-memory shell with empty stdin."""

    name = "xargs"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        max_args: int | None = None
        max_lines: int | None = None
        replace: str | None = None
        delimiter: str | None = None
        no_empty = verbose = exact = False
        eof: str | None = None
        size = _XARGS_DEFAULT_SIZE
        arg_file: str | None = None
        index = 0

        def take(option: str, inline: str) -> str | ExecResult:
            nonlocal index
            if inline:
                return inline
            if index >= len(args):
                return _usage_error("xargs", f"option requires an argument -- '{option}'")
            index += 1
            return args[index - 1]

        while index < len(args):
            arg = args[index]
            index += 1
            if arg == "--":
                break
            if not arg.startswith("-") or arg == "-":
                index -= 1
                break
            name, equals, inline = arg.partition("=")
            long_names = {
                "--max-args": "n",
                "--max-lines": "L",
                "--replace": "I",
                "--delimiter": "d",
                "--null": "0",
                "--no-run-if-empty": "r",
                "--verbose": "t",
                "--eof": "E",
                "--max-chars": "s",
                "--exit": "x",
                "--arg-file": "a",
                "--max-procs": "P",
                "--interactive": "p",
                "--open-tty": "o",
            }
            if arg.startswith("--"):
                if name not in long_names:
                    return _usage_error("xargs", f"unrecognized option '{arg}'")
                letter = long_names[name]
                if letter == "I" and not equals:
                    replace = "{}"
                    continue
                if letter in "nLdEsaP" and not equals:
                    value = take(letter, "")
                    if isinstance(value, ExecResult):
                        return value
                    inline = value
                options = [(letter, inline)]
            else:
                options: list[tuple[str, str]] = []
                letters = arg[1:]
                position = 0
                while position < len(letters):
                    letter = letters[position]
                    position += 1
                    if letter in "nLIdEsaP":
                        value = take(letter, letters[position:])
                        if isinstance(value, ExecResult):
                            return value
                        options.append((letter, value))
                        break
                    if letter in ("i", "e", "l"):
                        options.append((letter, letters[position:]))
                        break
                    options.append((letter, ""))
            for letter, value in options:
                if letter in ("n", "L", "l", "s", "P"):
                    text = value if value or letter != "l" else "1"
                    if not re.fullmatch(r"\d+", text):
                        return _usage_error(
                            "xargs", f'invalid number "{text}" for -{letter} option'
                        )
                    number = int(text)
                    if letter == "P":
                        continue
                    if number < 1:
                        return _usage_error(
                            "xargs", f"value {number} for -{letter} option should be >= 1"
                        )
                    if letter == "n":
                        max_args, max_lines, replace = number, None, None
                    elif letter in ("L", "l"):
                        max_lines, max_args, replace = number, None, None
                    else:
                        size = number
                elif letter in ("I", "i"):
                    replace = value or "{}"
                    max_args = max_lines = None
                elif letter == "0":
                    delimiter = "\0"
                elif letter == "d":
                    escaped = _escape_delimiter(value)
                    if escaped is None:
                        return _usage_error(
                            "xargs", f"invalid input delimiter specification {value}"
                        )
                    delimiter = escaped
                elif letter == "r":
                    no_empty = True
                elif letter == "t":
                    verbose = True
                elif letter in ("E", "e"):
                    eof = value or None
                elif letter == "x":
                    exact = True
                elif letter == "a":
                    arg_file = value
                elif letter in ("p", "o"):
                    return _unsupported("xargs", f"the option -{letter} (no terminal)")
                else:
                    return _usage_error("xargs", f"invalid option -- '{letter}'")
        command = args[index:] or ["echo"]
        text = ctx.stdin
        if arg_file is not None:
            fs: Any = ctx.fs
            try:
                text = await fs.read_file(fs.resolve_path(ctx.cwd, arg_file))
            except OSError as error:
                return _result(
                    stderr=f"xargs: Cannot open input file '{arg_file}': {_reason(error)}\n",
                    exit_code=1,
                )
        try:
            batches = self._batches(text, command, delimiter, replace, max_args, max_lines, eof)
        except _XargsInputError as error:
            return _result(stderr=f"xargs: {error}\n", exit_code=1)
        runs: list[list[str]] = []
        for batch in batches:
            runs.extend(self._fit(command, batch, size, exact) if replace is None else [batch])
        if not runs and not no_empty and replace is None:
            runs = [list(command)]
        stdout: list[str] = []
        stderr: list[str] = []
        status = 0
        for words in runs:
            if verbose:
                stderr.append(" ".join(words) + "\n")
            outcome = await self._run(words, ctx)
            stdout.append(outcome.stdout)
            stderr.append(outcome.stderr)
            code = outcome.exit_code
            if code == 255:
                stderr.append(f"xargs: {words[0]}: exited with status 255; aborting\n")
                return _result("".join(stdout), "".join(stderr), 124)
            if code in (126, 127):
                return _result("".join(stdout), "".join(stderr), code)
            if code:
                status = 123
        return _result("".join(stdout), "".join(stderr), status)

    def _batches(
        self,
        text: str,
        command: list[str],
        delimiter: str | None,
        replace: str | None,
        max_args: int | None,
        max_lines: int | None,
        eof: str | None,
    ) -> list[list[str]]:
        if replace is not None:
            if delimiter is not None:
                lines = _lines(text, delimiter)
            else:
                lines = [_xargs_replace_line(raw) for raw in text.split("\n")]
                lines = [line for line in lines if line]
                if eof is not None and eof in lines:
                    lines = lines[: lines.index(eof)]
            return [[word.replace(replace, line) for word in command] for line in lines]
        if max_lines is not None and delimiter is None:
            groups = _xargs_lines(text, strip=True)
            return [
                [*command, *sum(groups[at : at + max_lines], list[str]())]
                for at in range(0, len(groups), max_lines)
            ]
        if delimiter is not None:
            items = text.split(delimiter)
            if items and items[-1] == "":
                items.pop()
        else:
            items = _xargs_items(text, eof)
        if not items:
            return []
        if max_args is None and max_lines is not None:
            max_args = max_lines
        step = max_args or len(items)
        return [[*command, *items[at : at + step]] for at in range(0, len(items), step)]

    def _fit(self, command: list[str], words: list[str], size: int, exact: bool) -> list[list[str]]:
        """Split one batch where its command line would pass ``-s`` characters."""
        base = sum(len(word) + 1 for word in command)
        runs: list[list[str]] = []
        current = list(command)
        length = base
        for word in words[len(command) :]:
            if length + len(word) + 1 > size and len(current) > len(command):
                runs.append(current)
                current, length = list(command), base
            current.append(word)
            length += len(word) + 1
        runs.append(current)
        return runs

    async def _run(self, words: list[str], ctx: CommandContext) -> ExecResult:
        if ctx.exec is None:
            return _result(stderr="xargs: cannot run commands here\n", exit_code=126)
        script = " ".join(_shell_word(word) for word in words)
        outcome = await ctx.exec(script, {"cwd": ctx.cwd})
        if outcome.exit_code == 127 and ": command not found" in outcome.stderr:
            # GNU xargs runs the program itself and reports its own error.
            return _result(outcome.stdout, f"xargs: {words[0]}: No such file or directory\n", 127)
        return outcome


# -- registration and interpreter patches --------------------------------------------------------------


def replaced_commands(commands: dict[str, Command]) -> None:
    """Put this module's commands into ``commands`` (a just-bash registry): new ones (``uname``,
    ``id``, ``mktemp``) and replacements, some wrapping just-bash's own."""
    commands["cp"] = _CpPreserving(commands["cp"])
    commands["head"] = _HeadOfDevices(commands["head"])
    for command in (
        _Ls(),
        _Stat(),
        _Touch(),
        _Uname(),
        _Id(),
        _Whoami(),
        _Hostname(),
        _Mktemp(),
        _Date(),
        _Paste(),
        _Xargs(),
        _Realpath(),
    ):
        commands[command.name] = command


_NOT_FOUND_HINT = (
    '(the in-memory sandbox has no {name}; use provider = "docker", or run it where real '
    "programs exist)"
)


def _with_hint(
    original: Callable[..., Awaitable[ExecResult]],
) -> Callable[..., Awaitable[ExecResult]]:
    async def try_execute(self: object, cmd_name: str, args: list[str], stdin: str) -> ExecResult:
        result = await original(self, cmd_name, args, stdin)
        suffix = f"{cmd_name}: command not found\n"
        if result.exit_code == 127 and result.stderr.endswith(suffix):
            head = result.stderr[: -len(suffix)]
            if "/" in cmd_name:  # a path: bash says what is wrong with the file
                stderr = f"{head}{cmd_name}: No such file or directory\n"
            else:
                hint = _NOT_FOUND_HINT.format(name=cmd_name)
                stderr = f"{head}{cmd_name}: command not found {hint}\n"
            return ExecResult(stdout=result.stdout, stderr=stderr, exit_code=127)
        return result

    return try_execute


def patch_interpreter() -> None:
    """In the worker: a missing command names the in-memory sandbox and the alternative, and
    ``find -mtime N`` compares whole days (GNU: ``+0`` is "more than a day ago")."""
    from just_bash.commands.find.find import FindCommand
    from just_bash.interpreter.interpreter import Interpreter

    interpreter: Any = Interpreter
    if not getattr(interpreter, "_pai_not_found_hint", False):
        interpreter._try_execute_vfs_script = _with_hint(interpreter._try_execute_vfs_script)
        interpreter._pai_not_found_hint = True
    find: Any = FindCommand
    if not getattr(find, "_pai_whole_days", False):
        original: Callable[[object, float, str], bool] = find._match_numeric

        def whole_days(self: object, actual: float, spec: str) -> bool:
            return original(self, math.floor(actual), spec)

        find._match_numeric = whole_days
        find._pai_whole_days = True
