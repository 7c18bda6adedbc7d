"""``jq``: jq 1.6's command line and output over just-bash's jq interpreter.

just-bash's jq interpreter (its query engine, shared with yq and xan) reads most filters right;
its command had no ``--arg``/``--argjson`` and printed Python's JSON. :class:`Jq` parses jq's
options (``--arg``, ``--argjson``, ``--slurpfile``, ``--rawfile``, ``--args``/``--jsonargs``,
``-f``, ``--indent``, ``--tab``, ``-e`` exit codes, ``-s``, ``-n``, ``-R``, ``-j``, ``-a``,
``-S``, ``--seq``), prints numbers and strings as jq 1.6 does, and reports errors with jq's
words and exit codes. :func:`patch_query_engine` fixes, in the engine, what scripts hit:
``@csv``/``@tsv`` of booleans, numbers and null, arithmetic and its errors, paths and
assignment (``.a.b = 1`` on ``{}``, ``del(.[] | select(...))``), sorting in jq's order,
interpolation producing every combination, Oniguruma's ``(?<name>...)`` groups, ``input``/
``inputs``, unbound ``$variables`` refused. Those fixes apply to yq and xan too (their engine).
"""

from __future__ import annotations

import calendar
import itertools
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from just_bash.types import Command, CommandContext, ExecResult

from pai.sandbox_inmemory._worker._posix import (
    UnsupportedHere,
    UsageError,
    exec_result,
    os_reason,
    read_text,
    unsupported,
)

__all__ = ["Jq", "jq_json", "jq_number", "patch_query_engine"]


# -- jq ----------------------------------------------------------------------------------------------------


def jq_number(number: float | int) -> str:
    """A number as jq 1.6 prints it: the shortest digits that read back the same double,
    written out in full unless the exponent is far from them (``1e+17``, ``1e-05``)."""
    try:
        value = float(number)
    except OverflowError:
        value = math.inf if number > 0 else -math.inf
    if math.isnan(value):
        return "null"
    if math.isinf(value):
        value = math.copysign(1.7976931348623157e308, value)
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    shortest = Decimal(repr(abs(value))).normalize()
    _, digit_tuple, exponent_value = shortest.as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + int(exponent_value)
    sign = "-" if value < 0 else ""
    if point <= -4 or point - len(digits) > 15:
        exponent = point - 1
        head = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{head}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


_JSON_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\t": "\\t",
    "\r": "\\r",
    "\b": "\\b",
    "\f": "\\f",
}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f]')
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _jq_string(text: str, ascii_only: bool = False) -> str:
    def escape(found: re.Match[str]) -> str:
        char = found.group()
        return _JSON_ESCAPES.get(char) or f"\\u{ord(char):04x}"

    body = _NEEDS_ESCAPE.sub(escape, text)
    if ascii_only:

        def non_ascii(found: re.Match[str]) -> str:
            code = ord(found.group())
            if code > 0xFFFF:
                code -= 0x10000
                return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
            return f"\\u{code:04x}"

        body = _NON_ASCII.sub(non_ascii, body)
    return f'"{body}"'


def jq_json(
    value: Any,
    *,
    indent: str | None = None,
    sort_keys: bool = False,
    ascii_only: bool = False,
    level: int = 0,
) -> str:
    """``value`` as jq prints it: compact (``indent=None``) or pretty, numbers as jq 1.6 writes
    them."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return jq_number(value)
    if isinstance(value, str):
        return _jq_string(value, ascii_only)
    if isinstance(value, dict):
        items = cast(dict[str, Any], value).items()
        if sort_keys:
            items = sorted(items)
        if not items:
            return "{}"
        parts = [
            _jq_string(str(key), ascii_only)
            + (":" if indent is None else ": ")
            + jq_json(
                item, indent=indent, sort_keys=sort_keys, ascii_only=ascii_only, level=level + 1
            )
            for key, item in items
        ]
    elif isinstance(value, (list, tuple)):
        sequence = cast(list[Any], value)
        if not sequence:
            return "[]"
        parts = [
            jq_json(
                item, indent=indent, sort_keys=sort_keys, ascii_only=ascii_only, level=level + 1
            )
            for item in sequence
        ]
    else:
        return _jq_string(str(value), ascii_only)
    opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
    if indent is None:
        return opening + ",".join(parts) + closing
    inner = "\n" + indent * (level + 1)
    return opening + inner + ("," + inner).join(parts) + "\n" + indent * level + closing


def _jq_dumps(value: Any, **options: Any) -> str:
    """``json.dumps`` for just-bash's query engine: jq's compact text."""
    return jq_json(value, sort_keys=bool(options.get("sort_keys")))


def _jq_text(value: Any) -> str:
    return value if isinstance(value, str) else jq_json(value)


def _jq_row(value: Any, kind: str) -> str:
    from just_bash.query_engine.types import JqError

    if not isinstance(value, list):
        raise JqError(
            f"{_jq_type(value)} ({jq_json(value)[:11]}) cannot be {kind}-formatted, only an array can be"
        )
    cells: list[str] = []
    for item in cast(list[Any], value):
        if isinstance(item, (dict, list)):
            raise JqError(f"{_jq_type(item)} ({jq_json(item)[:11]}) is not valid in a {kind} row")
        if item is None:
            cells.append("")
        elif item is True or item is False:
            cells.append("true" if item else "false")
        elif isinstance(item, (int, float)):
            cells.append(jq_number(item))
        elif kind == "csv":
            cells.append('"' + str(item).replace('"', '""') + '"')
        else:
            cells.append(
                str(item)
                .replace("\\", "\\\\")
                .replace("\t", "\\t")
                .replace("\n", "\\n")
                .replace("\r", "\\r")
            )
    return ("," if kind == "csv" else "\t").join(cells)


def _jq_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class _ModuleView:
    """A module as one patched module sees it: the real one, with some names replaced."""

    def __init__(self, real: Any, **replaced: Any) -> None:
        self._real = real
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


_JQ_PATCHED: list[bool] = []


def _var_ref(name: str) -> Any:
    from just_bash.query_engine import VarRefNode

    return VarRefNode(name)


class JqUndefinedVariable(Exception):
    """A jq program reads a ``$variable`` nothing binds (jq refuses to compile it)."""


def _jq_error(message: str) -> Exception:
    from just_bash.query_engine.types import JqError

    return JqError(message)


def _jq_brief(value: Any) -> str:
    """A value in an error message, cut as jq cuts it."""
    text = jq_json(value)
    return text if len(text) <= 14 else text[:11] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _jq_arithmetic(operator: str, left: Any, right: Any) -> Any:
    """``+ - * / %`` as jq 1.6 computes them, with its errors (just-bash gives null)."""
    verbs = {"+": "added", "-": "subtracted", "*": "multiplied", "/": "divided", "%": "divided"}
    if operator == "+":
        if left is None:
            return right
        if right is None:
            return left
        if _is_number(left) and _is_number(right):
            return left + right
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        if isinstance(left, list) and isinstance(right, list):
            return cast(list[Any], left) + cast(list[Any], right)
        if isinstance(left, dict) and isinstance(right, dict):
            return {**cast(dict[str, Any], left), **cast(dict[str, Any], right)}
    elif operator == "-":
        if _is_number(left) and _is_number(right):
            return left - right
        if isinstance(left, list) and isinstance(right, list):
            removed = cast(list[Any], right)
            return [item for item in cast(list[Any], left) if item not in removed]
    elif operator == "*":
        if _is_number(left) and _is_number(right):
            return left * right
        text, times = (left, right) if isinstance(left, str) else (right, left)
        if isinstance(text, str) and _is_number(times):
            count = int(times)
            return text * count if count > 0 else None
        if isinstance(left, dict) and isinstance(right, dict):
            return _jq_merge(cast(dict[str, Any], left), cast(dict[str, Any], right))
    elif operator == "/":
        if _is_number(left) and _is_number(right):
            if right == 0:
                raise _jq_error(
                    f"{_jq_type(left)} ({_jq_brief(left)}) and {_jq_type(right)} "
                    f"({_jq_brief(right)}) cannot be divided because the divisor is zero"
                )
            quotient = left / right
            return int(quotient) if quotient.is_integer() and abs(quotient) < 2**53 else quotient
        if isinstance(left, str) and isinstance(right, str):
            return left.split(right) if left else []
    elif operator == "%" and _is_number(left) and _is_number(right):
        divisor = int(right)
        if divisor == 0:
            raise _jq_error(
                f"{_jq_type(left)} ({_jq_brief(left)}) and {_jq_type(right)} "
                f"({_jq_brief(right)}) cannot be divided because the divisor is zero"
            )
        return int(math.fmod(int(left), divisor))
    raise _jq_error(
        f"{_jq_type(left)} ({_jq_brief(left)}) and {_jq_type(right)} ({_jq_brief(right)}) "
        f"cannot be {verbs[operator]}"
    )


def _jq_merge(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    merged = dict(left)
    for key, value in right.items():
        if isinstance(merged.get(key), dict) and isinstance(value, dict):
            merged[key] = _jq_merge(merged[key], cast(dict[str, Any], value))
        else:
            merged[key] = value
    return merged


Path = list[Any]


def _jq_getpath(value: Any, path: Path) -> Any:
    for key in path:
        if value is None:
            return None
        if isinstance(key, str):
            if not isinstance(value, dict):
                raise _jq_error(f'Cannot index {_jq_type(value)} with "{key}"')
            value = cast(dict[str, Any], value).get(key)
            continue
        if isinstance(key, dict):
            if not isinstance(value, (list, str)):
                raise _jq_error(f"Cannot index {_jq_type(value)} with object")
            sliced = cast(list[Any] | str, value)
            start, end = _jq_slice(cast(dict[str, Any], key), len(sliced))
            value = sliced[start:end]
        else:
            if not isinstance(value, list):
                raise _jq_error(f"Cannot index {_jq_type(value)} with number")
            items = cast(list[Any], value)
            index = int(key)
            value = items[index] if -len(items) <= index < len(items) else None
    return value


def _jq_slice(key: dict[str, Any], length: int) -> tuple[int, int]:
    def bound(item: Any, default: int) -> int:
        if item is None:
            return default
        number = math.floor(item)
        if number < 0:
            number += length
        return min(max(number, 0), length)

    start = bound(key.get("start"), 0)
    return start, max(start, bound(key.get("end"), length))


def _jq_setpath(value: Any, path: Path, new: Any) -> Any:
    if not path:
        return new
    key, rest = path[0], path[1:]
    if isinstance(key, str):
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise _jq_error(f'Cannot index {_jq_type(value)} with "{key}"')
        result = dict(cast(dict[str, Any], value))
        result[key] = _jq_setpath(result.get(key), rest, new)
        return result
    if value is None:
        value = []
    if not isinstance(value, list):
        kind = "object" if isinstance(key, dict) else "number"
        raise _jq_error(f"Cannot index {_jq_type(value)} with {kind}")
    items = list(cast(list[Any], value))
    if isinstance(key, dict):
        start, end = _jq_slice(cast(dict[str, Any], key), len(items))
        replacement = _jq_setpath(items[start:end], rest, new)
        if not isinstance(replacement, list):
            raise _jq_error("A slice of an array can only be assigned another array")
        return items[:start] + cast(list[Any], replacement) + items[end:]
    index = int(key)
    if index < 0:
        index += len(items)
        if index < 0:
            raise _jq_error("Out of bounds negative array index")
    items.extend([None] * (index + 1 - len(items)))
    items[index] = _jq_setpath(items[index], rest, new)
    return items


def _jq_delpath(value: Any, path: Path) -> Any:
    if not path or value is None:
        return None if not path else value
    key, rest = path[0], path[1:]
    if rest:
        child = _jq_getpath(value, [key])
        if child is None:
            return value
        return _jq_setpath(value, [key], _jq_delpath(child, rest))
    if isinstance(key, str):
        if not isinstance(value, dict):
            raise _jq_error(f"Cannot delete field at object index of {_jq_type(value)}")
        result = dict(cast(dict[str, Any], value))
        result.pop(key, None)
        return result
    if not isinstance(value, list):
        raise _jq_error(f"Cannot delete field at index of {_jq_type(value)}")
    items = list(cast(list[Any], value))
    if isinstance(key, dict):
        start, end = _jq_slice(cast(dict[str, Any], key), len(items))
        return items[:start] + items[end:]
    index = int(key)
    if -len(items) <= index < len(items):
        del items[index]
    return items


def _jq_path_order(path: Path) -> list[tuple[int, Any]]:
    return [
        (1, item)
        if isinstance(item, str)
        else (2, json.dumps(item, sort_keys=True))
        if isinstance(item, dict)
        else (0, item)
        for item in path
    ]


def _jq_delpaths(value: Any, paths: list[Path]) -> Any:
    for path in sorted(paths, key=_jq_path_order, reverse=True):
        value = _jq_delpath(value, path)
    return value


class _JqEngine:
    """Paths, assignment and the calls just-bash's query engine gets wrong, on its AST."""

    def __init__(self, evaluator: Any) -> None:
        self.evaluator = evaluator

    def eval(self, value: Any, node: Any, ctx: Any) -> list[Any]:
        return cast(list[Any], self.evaluator._eval_node(value, node, ctx))

    def paths(self, value: Any, node: Any, ctx: Any) -> list[tuple[Path, Any]]:
        """``path(node)`` with the value at each path."""
        kind = node.type
        if kind == "Identity":
            return [([], value)]
        if kind == "Paren":
            return self.paths(value, node.expr, ctx)
        if kind in ("Field", "Index", "Slice", "Iterate"):
            bases: list[tuple[Path, Any]] = (
                self.paths(value, node.base, ctx) if node.base is not None else [([], value)]
            )
            out: list[tuple[Path, Any]] = []
            for path, current in bases:
                if kind == "Field":
                    keys: list[Any] = [node.name]
                elif kind == "Index":
                    keys = self.eval(value, node.index, ctx)
                elif kind == "Slice":
                    starts = self.eval(value, node.start, ctx) if node.start is not None else [None]
                    ends = self.eval(value, node.end, ctx) if node.end is not None else [None]
                    keys = [{"start": a, "end": b} for a in starts for b in ends]
                elif current is None:
                    keys = []
                elif isinstance(current, list):
                    keys = list(range(len(cast(list[Any], current))))
                elif isinstance(current, dict):
                    keys = list(cast(dict[str, Any], current))
                else:
                    raise _jq_error(f"Cannot iterate over {_jq_type(current)}")
                for key in keys:
                    if isinstance(key, float) and key.is_integer():
                        key = int(key)
                    out.append(([*path, key], _jq_getpath(current, [key])))
            return out
        if kind == "Pipe":
            return [
                (left + right, found)
                for left, middle in self.paths(value, node.left, ctx)
                for right, found in self.paths(middle, node.right, ctx)
            ]
        if kind == "Comma":
            return self.paths(value, node.left, ctx) + self.paths(value, node.right, ctx)
        if kind == "Optional":
            try:
                return self.paths(value, node.expr, ctx)
            except Exception:
                return []
        if kind == "Recurse":
            return self.recurse(value, [])
        if kind == "Cond":
            for condition in self.eval(value, node.cond, ctx):
                if condition is not None and condition is not False:
                    return self.paths(value, node.then, ctx)
                for branch in node.elifs:
                    if any(
                        c is not None and c is not False for c in self.eval(value, branch.cond, ctx)
                    ):
                        return self.paths(value, branch.then, ctx)
                return (
                    self.paths(value, node.else_, ctx) if node.else_ is not None else [([], value)]
                )
            return []
        if kind == "VarBind":
            out = []
            for bound in self.eval(value, node.value, ctx):
                inner = type(ctx)(
                    vars=self.evaluator._bind_pattern(node.name, bound, ctx.vars),
                    limits=ctx.limits,
                    env=ctx.env,
                    root=ctx.root,
                    current_path=ctx.current_path,
                    funcs=ctx.funcs,
                )
                out.extend(self.paths(value, node.body, inner))
            return out
        if kind == "Call":
            name, args = node.name, node.args
            if name == "empty":
                return []
            if name == "select" and len(args) == 1:
                keep = any(c is not None and c is not False for c in self.eval(value, args[0], ctx))
                return [([], value)] if keep else []
            if name == "recurse" and not args:
                return self.recurse(value, [])
            if name == "getpath" and len(args) == 1:
                return [
                    (list(p), _jq_getpath(value, list(p))) for p in self.eval(value, args[0], ctx)
                ]
            if name in ("first", "last") and len(args) == 1:
                found = self.paths(value, args[0], ctx)
                return found[:1] if name == "first" else found[-1:]
            if name in _JQ_TYPE_FILTERS and not args:
                return [([], value)] if _JQ_TYPE_FILTERS[name](value) else []
            if name == "recurse" and len(args) == 1:
                return self.recurse_with(value, args[0], ctx, [])
            function = ctx.funcs.get(f"{name}/{len(args)}") or ctx.funcs.get(name)
            if function is not None and not args and not function.args:
                return self.paths(value, function.body, ctx)
            if name == "error":
                self.eval(value, node, ctx)
        if kind == "Literal" and node.value is None:
            return []
        raise _jq_error("Invalid path expression")

    def recurse_with(self, value: Any, step: Any, ctx: Any, path: Path) -> list[tuple[Path, Any]]:
        out: list[tuple[Path, Any]] = [(path, value)]
        for relative, child in self.paths(value, step, ctx):
            out.extend(self.recurse_with(child, step, ctx, path + relative))
        return out

    def recurse(self, value: Any, path: Path) -> list[tuple[Path, Any]]:
        out: list[tuple[Path, Any]] = [(path, value)]
        if isinstance(value, list):
            for index, item in enumerate(cast(list[Any], value)):
                out.extend(self.recurse(item, [*path, index]))
        elif isinstance(value, dict):
            for key, item in cast(dict[str, Any], value).items():
                out.extend(self.recurse(item, [*path, key]))
        return out

    def update(self, value: Any, node: Any, ctx: Any) -> list[Any]:
        operator = node.op
        targets = [path for path, _ in self.paths(value, node.path, ctx)]
        if operator == "|=":
            result = value
            for path in targets:
                outputs = self.eval(_jq_getpath(result, path), node.value, ctx)
                if outputs:
                    result = _jq_setpath(result, path, outputs[0])
                else:
                    result = _jq_delpath(result, path)
            return [result]
        results: list[Any] = []
        for new in self.eval(value, node.value, ctx):
            result = value
            for path in targets:
                if operator == "=":
                    updated = new
                elif operator == "//=":
                    old = _jq_getpath(result, path)
                    updated = old if old is not None and old is not False else new
                else:
                    updated = _jq_arithmetic(operator[0], _jq_getpath(result, path), new)
                result = _jq_setpath(result, path, updated)
            results.append(result)
        return results

    def interpolate(self, value: Any, node: Any, ctx: Any) -> list[Any]:
        choices: list[list[str]] = []
        for part in node.parts:
            if isinstance(part, str):
                choices.append([part])
            else:
                choices.append([_jq_text(item) for item in self.eval(value, part, ctx)])
        return ["".join(reversed(parts)) for parts in itertools.product(*reversed(choices))]


_JQ_TYPE_FILTERS: dict[str, Callable[[Any], bool]] = {
    "nulls": lambda v: v is None,
    "booleans": lambda v: isinstance(v, bool),
    "numbers": _is_number,
    "strings": lambda v: isinstance(v, str),
    "arrays": lambda v: isinstance(v, list),
    "objects": lambda v: isinstance(v, dict),
    "iterables": lambda v: isinstance(v, (list, dict)),
    "scalars": lambda v: not isinstance(v, (list, dict)),
    "values": lambda v: v is not None,
}
_JQ_NUMBER = re.compile(r"\s*-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")
_ONIG_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")
_JQ_REGEX_FLAGS = {
    "g": 0,
    "i": re.IGNORECASE,
    "x": re.VERBOSE,
    "n": 0,
    "s": re.DOTALL,
    "p": re.DOTALL | re.MULTILINE,
    "l": 0,
}


def _jq_regex(pattern: Any, flags: Any) -> tuple[re.Pattern[str], bool, bool]:
    if not isinstance(pattern, str):
        raise _jq_error(
            f"{jq_json(pattern)} ({_jq_type(pattern)}) cannot be matched, as it is not a string"
        )
    modes = flags if isinstance(flags, str) else ""
    if flags is not None and not isinstance(flags, str):
        raise _jq_error(f"{jq_json(flags)} ({_jq_type(flags)}) is not a string")
    bits = 0
    for flag in modes:
        if flag not in _JQ_REGEX_FLAGS:
            raise _jq_error(f"{modes} is not a valid modifier string")
        bits |= _JQ_REGEX_FLAGS[flag]
    try:
        compiled = re.compile(_ONIG_NAMED_GROUP.sub("(?P<", pattern), bits)
    except re.error as error:
        raise _jq_error(
            f"{pattern} (at offset {error.pos or 0}) is not a valid regex: {error.msg}"
        ) from None
    return compiled, "g" in modes, "n" in modes


def _jq_matches(text: Any, pattern: Any, flags: Any, test: bool = False) -> list[dict[str, Any]]:
    if not isinstance(text, str):
        raise _jq_error(
            f"{_jq_type(text)} ({_jq_brief(text)}) cannot be matched, as it is not a string"
        )
    regex, every, skip_empty = _jq_regex(pattern, flags)
    names = {number: name for name, number in regex.groupindex.items()}
    found: list[dict[str, Any]] = []
    for match in regex.finditer(text):
        if skip_empty and match.end() == match.start():
            continue
        captures: list[dict[str, Any]] = []
        for group in range(1, regex.groups + 1):
            start = match.start(group)
            captures.append(
                {
                    "offset": start,
                    "length": match.end(group) - start if start >= 0 else 0,
                    "string": match.group(group),
                    "name": names.get(group),
                }
            )
        found.append(
            {
                "offset": match.start(),
                "length": match.end() - match.start(),
                "string": match.group(),
                "captures": captures,
            }
        )
        if test or not every:
            break
    return found


def _jq_captures(match: dict[str, Any]) -> dict[str, Any]:
    return {c["name"]: c["string"] for c in match["captures"] if c["name"] is not None}


def _jq_regex_call(
    engine: _JqEngine, value: Any, name: str, args: list[Any], ctx: Any
) -> list[Any] | None:
    """jq's regular-expression builtins (Oniguruma's ``(?<name>...)`` groups included)."""

    def arguments(index: int) -> list[Any]:
        return engine.eval(value, args[index], ctx) if index < len(args) else [None]

    def pattern_and_flags() -> list[tuple[Any, Any]]:
        if len(args) == 1:
            out: list[tuple[Any, Any]] = []
            for item in arguments(0):
                if isinstance(item, list):
                    pair = cast(list[Any], item)
                    out.append((pair[0] if pair else None, pair[1] if len(pair) > 1 else None))
                else:
                    out.append((item, None))
            return out
        return [
            (p, f)
            for p in arguments(0)
            for f in arguments(1 if name != "sub" and name != "gsub" else 2)
        ]

    if name in ("test", "match", "capture", "scan", "splits") or (
        name == "split" and len(args) == 2
    ):
        if not args or len(args) > 2:
            return None
        results: list[Any] = []
        for pattern, flags in pattern_and_flags():
            if name == "test":
                results.append(bool(_jq_matches(value, pattern, flags, test=True)))
            elif name == "match":
                results.extend(_jq_matches(value, pattern, flags))
            elif name == "capture":
                results.extend(_jq_captures(m) for m in _jq_matches(value, pattern, flags))
            elif name == "scan":
                for m in _jq_matches(value, pattern, "g" + (flags or "")):
                    results.append(
                        [c["string"] for c in m["captures"]] if m["captures"] else m["string"]
                    )
            else:
                pieces: list[str] = []
                position = 0
                for m in _jq_matches(value, pattern, "g" + (flags or "")):
                    pieces.append(value[position : m["offset"]])
                    position = m["offset"] + m["length"]
                pieces.append(value[position:])
                if name == "split":
                    results.append(pieces)
                else:
                    results.extend(pieces)
        return results
    if name in ("sub", "gsub"):
        if len(args) not in (2, 3):
            return None
        results = []
        patterns = arguments(0)
        flag_values = arguments(2) if len(args) == 3 else [None]
        for pattern in patterns:
            for flags in flag_values:
                modes = (flags or "") + ("g" if name == "gsub" else "")
                matches = _jq_matches(value, pattern, modes)
                if not matches:
                    results.append(value)
                    continue
                if "g" not in modes:
                    match = matches[0]
                    for replacement in engine.eval(_jq_captures(match), args[1], ctx):
                        if not isinstance(replacement, str):
                            raise _jq_error(
                                f"{_jq_type(value)} ({_jq_brief(value)}) cannot be added to a {_jq_type(replacement)}"
                            )
                        end = match["offset"] + match["length"]
                        results.append(value[: match["offset"]] + replacement + value[end:])
                    continue
                out: list[str] = []
                position = 0
                for match in matches:
                    replacements = engine.eval(_jq_captures(match), args[1], ctx)
                    replacement = replacements[-1] if replacements else ""
                    if not isinstance(replacement, str):
                        raise _jq_error(
                            f"{_jq_type(value)} ({_jq_brief(value)}) cannot be added to a {_jq_type(replacement)}"
                        )
                    out.append(value[position : match["offset"]] + replacement)
                    position = match["offset"] + match["length"]
                out.append(value[position:])
                results.append("".join(out))
        return results
    return None


def any_true(values: list[Any]) -> bool:
    return any(value is not None and value is not False for value in values)


def _jq_items(value: Any) -> list[Any]:
    if isinstance(value, list):
        return list(cast(list[Any], value))
    if isinstance(value, dict):
        return list(cast(dict[str, Any], value).values())
    raise _jq_error(
        f"Cannot iterate over {_jq_type(value)}"
        + (f" ({_jq_brief(value)})" if value is not None else "")
    )


def _jq_order(value: Any) -> tuple[Any, ...]:
    """A sort key giving jq's order: null < false < true < numbers < strings < arrays <
    objects (by their sorted keys, then their values)."""
    if value is None:
        return (0,)
    if value is False:
        return (1,)
    if value is True:
        return (2,)
    if _is_number(value):
        return (3, value)
    if isinstance(value, str):
        return (4, value)
    if isinstance(value, list):
        return (5, tuple(_jq_order(item) for item in cast(list[Any], value)))
    mapping = cast(dict[str, Any], value)
    keys = sorted(mapping)
    return (6, tuple(keys), tuple(_jq_order(mapping[key]) for key in keys))


def _jq_ordering_call(
    engine: _JqEngine, value: Any, name: str, args: list[Any], ctx: Any
) -> list[Any] | None:
    """``sort``, ``unique``, ``min``/``max`` and the ``_by`` forms in jq's order (just-bash
    compares the JSON text: ``10`` before ``9``)."""
    if name not in (
        "sort",
        "sort_by",
        "unique",
        "unique_by",
        "group_by",
        "min",
        "max",
        "min_by",
        "max_by",
    ):
        return None
    if len(args) != (1 if name.endswith("_by") else 0):
        return None
    if not isinstance(value, list):
        raise _jq_error(
            f"Cannot index {_jq_type(value)} with number"
            if value is not None or not name.startswith(("min", "max"))
            else "null (null) cannot be sorted, as it is not an array"
        )
    items = cast(list[Any], value)
    if args:
        keys = [_jq_order(engine.eval(item, args[0], ctx)) for item in items]
    else:
        keys = [_jq_order(item) for item in items]
    order = sorted(range(len(items)), key=lambda index: keys[index])
    if name in ("sort", "sort_by"):
        return [[items[index] for index in order]]
    if name in ("min", "max", "min_by", "max_by"):
        if not items:
            return [None]
        if name.startswith("min"):
            return [items[order[0]]]
        best = order[-1]
        for index in reversed(order):  # jq keeps the last of equal maxima
            if keys[index] == keys[best]:
                best = max(best, index)
        return [items[best]]
    groups: list[list[Any]] = []
    previous: tuple[Any, ...] | None = None
    for index in order:
        if previous is not None and keys[index] == previous:
            groups[-1].append(items[index])
        else:
            groups.append([items[index]])
        previous = keys[index]
    if name == "group_by":
        return [groups]
    return [[group[0] for group in groups]]


def _jq_stream(value: Any) -> list[Any]:
    events: list[Any] = []

    def walk(item: Any, path: Path) -> None:
        if isinstance(item, dict) and item:
            mapping = cast(dict[str, Any], item)
            keys = list(mapping)
            for key in keys:
                walk(mapping[key], [*path, key])
            events.append([[*path, keys[-1]]])
        elif isinstance(item, list) and item:
            sequence = cast(list[Any], item)
            for index, child in enumerate(sequence):
                walk(child, [*path, index])
            events.append([[*path, len(sequence) - 1]])
        else:
            events.append([path, item])

    walk(value, [])
    return events


def _jq_shell(value: Any) -> str:
    def quote(item: Any) -> str:
        if isinstance(item, str):
            return "'" + item.replace("'", "'\\''") + "'"
        if isinstance(item, (dict, list)):
            raise _jq_error(f"{_jq_type(item)} ({_jq_brief(item)}) can not be escaped for shell")
        return jq_json(item)

    if isinstance(value, list):
        return " ".join(quote(item) for item in cast(list[Any], value))
    return quote(value)


@dataclass
class _JqSession:
    """The inputs of one jq command, for ``input``, ``inputs`` and ``input_filename``."""

    queue: list[tuple[Any, str | None]]
    filename: str | None = None

    def next(self) -> Any:
        if not self.queue:
            raise _jq_error("No more inputs")
        value, self.filename = self.queue.pop(0)
        if isinstance(value, _JqBadInput):
            raise _jq_error(value.message)
        return value


@dataclass
class _JqBadInput:
    """Where the input stops being JSON (read by ``input`` with ``-n``)."""

    message: str


_JQ_SESSION: list[_JqSession] = []


def patch_query_engine() -> None:
    """jq 1.6's semantics in just-bash's query engine, where it differs: number output,
    ``@csv``/``@tsv``/``@sh``/``@text``, arithmetic and its errors, paths and assignment
    (``.a.b = 1`` on ``{}``, ``del(.[] | select(...))``), string interpolation producing every
    combination, regular expressions with named groups, ``input``/``inputs``, ``length`` of a
    number, ``nan``/``infinite``, unbound ``$variables`` refused, ``def f($x)``."""
    if _JQ_PATCHED:
        return
    from just_bash.query_engine import builtins as builtins_module
    from just_bash.query_engine import evaluator as evaluator_module

    view = _ModuleView(json, dumps=_jq_dumps)
    builtins_module.__dict__["json"] = view
    evaluator_module.__dict__["json"] = view
    original_call: Callable[..., list[Any]] = evaluator_module.__dict__["call_builtin"]
    original_eval: Callable[[Any, Any, Any], list[Any]] = evaluator_module._eval_node  # pyright: ignore[reportPrivateUsage]
    engine = _JqEngine(evaluator_module)

    def call_builtin(value: Any, name: str, args: list[Any], ctx: Any, eval_fn: Any) -> list[Any]:
        if not args:
            if name in ("@csv", "@tsv"):
                return [_jq_row(value, name[1:])]
            if name == "@text":
                return [_jq_text(value)]
            if name == "@sh":
                return [_jq_shell(value)]
            if name == "length":
                if _is_number(value):
                    return [abs(value)]
                if isinstance(value, bool):
                    raise _jq_error(f"boolean ({jq_json(value)}) has no length")
            if name == "nan":
                return [math.nan]
            if name == "infinite":
                return [math.inf]
            if name in ("isinfinite", "isnan", "isnormal"):
                if not _is_number(value):
                    raise _jq_error(f"{_jq_type(value)} ({_jq_brief(value)}) number required")
                number = float(value)
                if name == "isinfinite":
                    return [math.isinf(number)]
                if name == "isnan":
                    return [math.isnan(number)]
                return [math.isfinite(number) and number != 0]
            if name == "tonumber":
                if _is_number(value):
                    return [value]
                if isinstance(value, str) and _JQ_NUMBER.fullmatch(value):
                    number = float(value)
                    return [int(number) if number.is_integer() and abs(number) < 2**53 else number]
                if isinstance(value, str):
                    raise _jq_error(f"Cannot parse '{value}' as JSON")
                raise _jq_error(
                    f"{_jq_type(value)} ({_jq_brief(value)}) cannot be parsed as a number"
                )
            if name in _JQ_TYPE_FILTERS:
                return [value] if _JQ_TYPE_FILTERS[name](value) else []
            if name in ("fromdate", "fromdateiso8601"):
                if not isinstance(value, str):
                    raise _jq_error("strptime/1 requires string inputs and arguments")
                try:
                    moment = datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
                except ValueError:
                    raise _jq_error(
                        f'date "{value}" does not match format "%Y-%m-%dT%H:%M:%SZ"'
                    ) from None
                return [calendar.timegm(moment.timetuple())]
            if name in ("todate", "todateiso8601", "dateadd"):
                if not _is_number(value):
                    raise _jq_error("strftime/1 requires parsed datetime inputs")
                return [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(value))]
            if name in ("input", "inputs", "input_filename"):
                session = _JQ_SESSION[-1] if _JQ_SESSION else _JqSession([])
                if name == "input":
                    return [session.next()]
                if name == "inputs":
                    return [session.next() for _ in range(len(session.queue))]
                return [session.filename]
        ordered = _jq_ordering_call(engine, value, name, args, ctx)
        if ordered is not None:
            return ordered
        if name == "path" and len(args) == 1:
            return [path for path, _ in engine.paths(value, args[0], ctx)]
        if name in ("paths", "leaf_paths") and len(args) <= 1:
            found = [(path, item) for path, item in engine.recurse(value, []) if path]
            if name == "leaf_paths":
                return [path for path, item in found if not isinstance(item, (list, dict))]
            if not args:
                return [path for path, _ in found]
            return [
                path
                for path, item in found
                if any(r is not None and r is not False for r in engine.eval(item, args[0], ctx))
            ]
        if name in ("any", "all") and len(args) <= 2:
            generator = args[0] if len(args) == 2 else None
            condition = args[-1] if args else None
            items = (
                engine.eval(value, generator, ctx) if generator is not None else _jq_items(value)
            )
            truths = (
                any_true(engine.eval(item, condition, ctx))
                if condition is not None
                else any_true([item])
                for item in items
            )
            return [any(truths) if name == "any" else all(truths)]
        if name == "repeat" and len(args) == 1:
            results: list[Any] = []
            current = value
            for _ in range(ctx.limits.max_iterations):
                outputs = engine.eval(current, args[0], ctx)
                if not outputs:
                    break
                current = outputs[0]
                results.append(current)
            return results
        if name == "tostream" and not args:
            return _jq_stream(value)
        if name == "del" and len(args) == 1:
            return [_jq_delpaths(value, [path for path, _ in engine.paths(value, args[0], ctx)])]
        if name == "delpaths" and len(args) == 1:
            return [_jq_delpaths(value, list(paths)) for paths in engine.eval(value, args[0], ctx)]
        if name == "setpath" and len(args) == 2:
            return [
                _jq_setpath(value, list(path), new)
                for new in engine.eval(value, args[1], ctx)
                for path in engine.eval(value, args[0], ctx)
            ]
        regex = _jq_regex_call(engine, value, name, args, ctx)
        if regex is not None:
            return regex
        return original_call(value, name, args, ctx, eval_fn)

    def eval_node(value: Any, node: Any, ctx: Any) -> list[Any]:
        kind = node.type
        if kind == "VarRef" and node.name not in ctx.vars:
            if node.name in ctx.funcs:  # a $parameter of a def
                return engine.eval(value, ctx.funcs[node.name].body, ctx)
            if node.name == "$__loc__":
                return [{"file": "<top-level>", "line": 1}]
            if node.name != "$ENV":
                raise JqUndefinedVariable(f"{node.name} is not defined")
        elif kind == "Object":
            for entry in node.entries:  # {$name}: the key "name", the variable's value
                if isinstance(entry.key, str) and entry.key.startswith("$"):
                    entry.value = _var_ref(entry.key)
                    entry.key = entry.key[1:]
        elif kind == "UpdateOp":
            return engine.update(value, node, ctx)
        elif kind == "StringInterp":
            return engine.interpolate(value, node, ctx)
        elif kind == "BinaryOp" and node.op in ("+", "-", "*", "/", "%"):
            rights = engine.eval(value, node.right, ctx)
            lefts = engine.eval(value, node.left, ctx)
            return [_jq_arithmetic(node.op, left, right) for right in rights for left in lefts]
        return original_eval(value, node, ctx)

    evaluator_module.__dict__["call_builtin"] = call_builtin
    evaluator_module._eval_node = eval_node  # pyright: ignore[reportPrivateUsage]
    _JQ_PATCHED.append(True)


_JQ_USAGE = "Use jq --help for help with command-line options,\nor see the jq manpage, or online docs  at https://stedolan.github.io/jq\n"
_JQ_SHORT = {
    "r": "raw",
    "j": "join",
    "a": "ascii",
    "c": "compact",
    "s": "slurp",
    "n": "null_input",
    "e": "exit_status",
    "S": "sort_keys",
    "R": "raw_input",
    "M": "monochrome",
}
_JQ_LONG = {
    "--raw-output": "raw",
    "--join-output": "join",
    "--ascii-output": "ascii",
    "--compact-output": "compact",
    "--slurp": "slurp",
    "--null-input": "null_input",
    "--exit-status": "exit_status",
    "--sort-keys": "sort_keys",
    "--raw-input": "raw_input",
    "--monochrome-output": "monochrome",
    "--tab": "tab",
    "--seq": "seq",
}


@dataclass
class _JqOptions:
    flags: set[str] = field(default_factory=set[str])
    indent: int = 2
    named: dict[str, Any] = field(default_factory=dict[str, Any])
    positional: list[Any] = field(default_factory=list[Any])
    filter: str | None = None
    files: list[str] = field(default_factory=list[str])


def _jq_inputs(text: str, name: str) -> tuple[list[Any], str | None]:
    """The JSON values of ``text``, and the parse error after the last good one (jq's words)."""
    text = re.sub(r"[\ud800-\udfff]", "\ufffd", text)
    decoder = json.JSONDecoder(parse_constant=_refuse_constant)
    values: list[Any] = []
    position = 0
    length = len(text)
    while True:
        while position < length and text[position] in " \t\n\r":
            position += 1
        if position >= length:
            return values, None
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            if error.pos >= len(text.rstrip()) or "Unterminated" in error.msg:
                line = text.count("\n") + 1
                column = len(text) - text.rfind("\n") - 1
                return values, f"Unfinished JSON term at EOF at line {line}, column {column}"
            return values, f"Invalid literal at line {error.lineno}, column {error.colno}"
        except ValueError as error:
            return values, f"{error} at line {text.count(chr(10), 0, position) + 1}"
        values.append(value)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"Invalid literal {name}")


class Jq:
    """jq 1.6's command line over just-bash's jq interpreter: ``--arg``, ``--argjson``,
    ``--slurpfile``, ``--rawfile``, ``--args``/``--jsonargs``, ``-f``, ``--indent``, ``-e`` exit
    codes, and output formatted as jq formats it."""

    name = "jq"

    def __init__(self, inner: Command) -> None:
        self._inner = inner

    async def _options(self, args: list[str], ctx: CommandContext) -> _JqOptions:
        options = _JqOptions()
        positional_mode: str | None = None
        index = 0
        rest_are_operands = False

        def value(count: int, option: str) -> list[str]:
            nonlocal index
            if index + count > len(args):
                raise UsageError(
                    f"jq: error: {option} takes {'two parameters' if count == 2 else 'a parameter'} (e.g. {option} name value)"
                    if count == 2
                    else f"jq: error: {option} takes a parameter"
                )
            taken = args[index : index + count]
            index += count
            return taken

        while index < len(args):
            arg = args[index]
            index += 1
            if rest_are_operands or not arg.startswith("-") or arg == "-":
                if options.filter is None and "from_file" not in options.flags:
                    options.filter = arg
                elif positional_mode == "args":
                    options.positional.append(arg)
                elif positional_mode == "jsonargs":
                    try:
                        options.positional.append(json.loads(arg))
                    except ValueError:
                        raise UsageError("jq: Invalid JSON text passed to --jsonargs") from None
                else:
                    options.files.append(arg)
                continue
            if arg == "--":
                rest_are_operands = True
                continue
            if arg in _JQ_LONG:
                options.flags.add(_JQ_LONG[arg])
            elif arg == "--indent":
                (count,) = value(1, "--indent")
                if not count.isdigit() or int(count) > 7:
                    raise UsageError(
                        "jq: Cannot indent more than 7 characters"
                        if count.isdigit()
                        else "jq: --indent takes a number"
                    )
                options.indent = int(count)
            elif arg in ("--arg", "--argjson", "--slurpfile", "--rawfile"):
                name, text = value(2, arg)
                if arg == "--arg":
                    options.named[name] = text
                elif arg == "--argjson":
                    values, error = _jq_inputs(text, "--argjson")
                    if error is not None or len(values) != 1:
                        raise UsageError("jq: Invalid JSON text passed to --argjson")
                    options.named[name] = values[0]
                else:
                    try:
                        content = await read_text(ctx, text)
                    except OSError as problem:
                        raise UsageError(
                            f"jq: error: Could not open {text}: {os_reason(problem)}"
                        ) from None
                    if arg == "--rawfile":
                        options.named[name] = content
                    else:
                        values, error = _jq_inputs(content, text)
                        if error is not None:
                            raise UsageError(f"jq: Bad JSON in --slurpfile {name} {text}: {error}")
                        options.named[name] = values
            elif arg == "--args":
                positional_mode = "args"
            elif arg == "--jsonargs":
                positional_mode = "jsonargs"
            elif arg in ("-f", "--from-file"):
                (name,) = value(1, arg)
                try:
                    options.filter = await read_text(ctx, name)
                except OSError as problem:
                    raise UsageError(
                        f"jq: error: Could not open {name}: {os_reason(problem)}"
                    ) from None
                options.flags.add("from_file")
            elif arg in (
                "-h",
                "--help",
                "--version",
                "--color-output",
                "--stream",
                "--raw-output0",
                "-L",
            ) or arg.startswith("--"):
                raise UnsupportedHere(f"jq: the option {arg}")
            else:
                for letter in arg[1:]:
                    if letter not in _JQ_SHORT:
                        if letter in "fLC":
                            raise UnsupportedHere(
                                f"jq: -{letter} combined with other options"
                                if letter == "f"
                                else f"jq: -{letter}"
                            )
                        raise UsageError(f"jq: Unknown option: {arg}")
                    options.flags.add(_JQ_SHORT[letter])
        return options

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        from just_bash.query_engine import EvalContext, parse

        patch_query_engine()
        try:
            options = await self._options(args, ctx)
        except UsageError as error:
            return exec_result(stderr=f"{error}\n{_JQ_USAGE}", exit_code=2)
        except UnsupportedHere as error:
            return unsupported(str(error))
        if options.filter is None:
            return exec_result(
                stderr="Usage: jq [OPTIONS] FILTER [FILES...]\n" + _JQ_USAGE, exit_code=2
            )
        try:
            program = parse(options.filter)
        except Exception as error:  # the parser raises plain exceptions
            return exec_result(stderr=f"jq: error: {error}\njq: 1 compile error\n", exit_code=3)
        run = _JqRun(options)
        await run.read_inputs(ctx)
        named = dict(options.named)
        variables: dict[str, Any] = {f"${name}": item for name, item in named.items()}
        variables["$ARGS"] = {"positional": options.positional, "named": named}
        environment = EvalContext(vars=variables, env=dict(ctx.env))
        _JQ_SESSION.append(run.session)
        try:
            run.evaluate(program, environment)
        except JqUndefinedVariable as error:
            return exec_result(
                "".join(run.out),
                f"jq: error: {error} at <top-level>, line 1:\n{options.filter}\njq: 1 compile error\n",
                3,
            )
        finally:
            _JQ_SESSION.pop()
        return exec_result("".join(run.out), "".join(run.errors), run.exit_code())


@dataclass
class _JqRun:
    """One jq command: its inputs, output and errors."""

    options: _JqOptions
    out: list[str] = field(default_factory=list[str])
    errors: list[str] = field(default_factory=list[str])
    session: _JqSession = field(default_factory=lambda: _JqSession([]))
    code: int = 0
    last: Any = None
    produced: bool = False

    async def read_inputs(self, ctx: CommandContext) -> None:
        flags = self.options.flags
        texts: list[tuple[str | None, str]] = []
        if self.options.files or "null_input" not in flags or ctx.stdin:
            for name in self.options.files or ["-"]:
                if name == "-":
                    texts.append((None, ctx.stdin))
                    continue
                try:
                    texts.append((name, await read_text(ctx, name)))
                except OSError as error:
                    self.errors.append(f"jq: error: Could not open {name}: {os_reason(error)}\n")
                    self.code = 2
        queue: list[tuple[Any, str | None]] = []
        if "raw_input" in flags:
            if "slurp" in flags:
                queue.append(("".join(text for _, text in texts), None))
            else:
                for name, text in texts:
                    lines = text.split("\n")
                    if lines and lines[-1] == "":
                        lines.pop()
                    queue.extend((line, name) for line in lines)
        else:
            for name, text in texts:
                values, error = _jq_inputs(text, name or "<stdin>")
                queue.extend((value, name) for value in values)
                if error is not None:
                    if "null_input" in flags:  # only input/inputs read it: they fail there
                        queue.append((_JqBadInput(error), name))
                    else:
                        self.errors.append(f"parse error: {error}\n")
                        self.code = 2
                    break
            if "slurp" in flags:
                queue = [([value for value, _ in queue], None)]
        self.session = _JqSession(queue)

    def emit(self, result: Any) -> None:
        flags = self.options.flags
        self.last, self.produced = result, True
        if "seq" in flags:
            self.out.append("\x1e")
        if flags & {"raw", "join"} and isinstance(result, str):
            self.out.append(result)
        else:
            indent: str | None = "\t" if "tab" in flags else " " * self.options.indent or None
            self.out.append(
                jq_json(
                    result,
                    indent=None if "compact" in flags else indent,
                    sort_keys="sort_keys" in flags,
                    ascii_only="ascii" in flags,
                )
            )
        if "join" not in flags:
            self.out.append("\n")

    def evaluate(self, program: Any, environment: Any) -> None:
        null_input = "null_input" in self.options.flags
        while null_input or self.session.queue:
            item = None if null_input else self.session.next()
            null_input = False
            try:
                self.stream(
                    item,
                    program,
                    type(environment)(
                        vars=environment.vars,
                        env=environment.env,
                        root=item,
                        funcs=environment.funcs,
                    ),
                )
            except (MemoryError, JqUndefinedVariable):
                raise
            except Exception as error:  # jq reports a run-time error and goes on
                where = self.session.filename or "<stdin>"
                self.errors.append(f"jq: error (at {where}:0): {_jq_message(error)}\n")
                self.code = 5

    def stream(self, value: Any, node: Any, ctx: Any) -> None:
        """Evaluates ``node``, printing each output of a top-level ``,`` or ``|`` before the
        next is computed, so an error keeps what came before it (as jq does)."""
        from just_bash.query_engine import evaluator

        kind = node.type
        if kind == "Comma":
            self.stream(value, node.left, ctx)
            self.stream(value, node.right, ctx)
        elif kind == "Pipe":
            for item in evaluator.__dict__["_eval_node"](value, node.left, ctx):
                self.stream(item, node.right, ctx)
        elif kind == "Paren":
            self.stream(value, node.expr, ctx)
        else:
            for result in evaluator.__dict__["_eval_node"](value, node, ctx):
                self.emit(result)

    def exit_code(self) -> int:
        if "exit_status" in self.options.flags and self.code == 0:
            if not self.produced:
                return 4
            if self.last is None or self.last is False:
                return 1
        return self.code


def _jq_message(error: Exception) -> str:
    value = getattr(error, "value", None)
    if value is not None and not isinstance(value, str):
        return f"{jq_json(value)} (not a string)"
    return str(error)


_NO_OUTPUT = object()
