"""``awk``, ``sed``, ``grep`` and ``jq`` as GNU awk, GNU sed, GNU grep and jq 1.6 behave.

just-bash 0.2.1's versions of these commands are where scripts written for a real shell went
wrong most often, and silently (an awk condition that never matched, a sed block flattened, a
grep ``-r`` path made absolute, a jq ``@csv`` of ``True``). :func:`text_commands` gives the
provider's replacements: awk (``_awk``), sed (``_sed``) and grep (``_grep``) are written anew
against the GNU tools; jq (``_jq``) keeps just-bash's filter interpreter, with jq's command line
and output and fixes inside the interpreter. They share POSIX regular expressions (``_posix``).
Each was checked, case by case, against the GNU tool; a feature one lacks fails with exit code 2
and a message naming the in-memory provider.
"""

from __future__ import annotations

from just_bash.types import Command

from pai.sandbox_inmemory._worker._awk import Awk
from pai.sandbox_inmemory._worker._grep import Grep
from pai.sandbox_inmemory._worker._jq import Jq, patch_query_engine
from pai.sandbox_inmemory._worker._sed import Sed

__all__ = ["patch_query_engine", "text_commands"]


# -- the registry ----------------------------------------------------------------------------------------


def text_commands(commands: dict[str, Command]) -> dict[str, Command]:
    """The replacements for ``commands``' awk, sed, grep, egrep, fgrep and jq.

    awk loops stop at the command's ``max_awk_iterations`` (``ctx.limits``) with an error."""
    return {
        "jq": Jq(commands["jq"]),
        "awk": Awk(),
        "sed": Sed(),
        "grep": Grep(),
        "egrep": Grep("egrep", "E"),
        "fgrep": Grep("fgrep", "F"),
    }
