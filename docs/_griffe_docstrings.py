"""A griffe extension for the docs site: the reST habits of the docstrings, read as Markdown.

The docstrings are Markdown-ish prose with reST habits. Two would show through:

- roles, ``:class:`Agent```, ``:func:`define_tool```, ``:meth:`Sandbox.run_command```: Markdown
  shows the role's name as text before the code, so the role (and a leading ``~``) is dropped
  and the reader sees `Agent`;
- a literal block announced by ``Example::``: the indented block after it is already a Markdown
  code block, so ``::`` at the end of a line becomes ``:`` (and a line of only ``::`` goes).

Double backticks (``code``) are already a Markdown code span and are left as they are.

It also leaves out of the reference the special methods that say nothing to a reader of the API
(``__repr__``, ``__str__``, ``__slots__``, ``__reduce__``, ``__test__``); the context-manager and
container methods stay.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|term|ref):`~?([^`]+)`")
LITERAL_AFTER_TEXT = re.compile(r"(?m)(\S)::$")
LITERAL_ALONE = re.compile(r"(?m)^[ \t]*::$")
NOISE = frozenset({"__repr__", "__str__", "__slots__", "__reduce__", "__test__"})


class ReadableDocstrings(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            text = ROLE.sub(r"`\1`", obj.docstring.value)
            text = LITERAL_ALONE.sub("", LITERAL_AFTER_TEXT.sub(r"\1:", text))
            obj.docstring.value = text

    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        for name in NOISE & set(cls.members):
            cls.del_member(name)
