"""The limits of a server: what one request, one message and one caller may use."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What one request, one message and one caller may use. Past a limit the server answers
    413 (too large) or 429 (too many), with a JSON body naming the limit.

    - ``max_body_bytes``: a request body (checked while reading, with or without
      ``Content-Length``); attachments travel in the body, so it bounds them too;
    - ``max_message_chars``: the text of one user message;
    - ``max_attachment_bytes``: one attached file;
    - ``max_runs_per_identity``: runs one caller has going at once, counted per user key
      (``create_pai(user_key=...)``), or per scope key when the app derives none; across
      processes when the run channel is shared (PostgreSQL);
    - ``reattach_grace``: seconds a run goes on with no client reading it before it is
      cancelled (0 cancels it as soon as its last client disconnects);
    - ``retain_finished``: seconds a finished run's events stay readable for a client that
      resumes (``Last-Event-ID``); ``max_kept_runs`` bounds how many runs are kept, and
      ``max_run_bytes`` the events one run may keep (a run past it is cancelled: a model
      server that streams without end cannot fill the server's memory);
    - ``keepalive``: seconds between SSE comment lines on a quiet stream (proxies close
      connections that stay silent).
    """

    max_body_bytes: int = 1024 * 1024
    max_message_chars: int = 100_000
    max_attachment_bytes: int = 10 * 1024 * 1024
    max_runs_per_identity: int = 4
    reattach_grace: float = 5.0
    retain_finished: float = 300.0
    max_kept_runs: int = 1000
    max_run_bytes: int = 32 * 1024 * 1024
    keepalive: float = 15.0

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.type == "int":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(
                        f"HttpLimits({spec.name}=...) must be an int >= 1, got {value!r}"
                    )
            elif (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
                or (spec.name == "keepalive" and value == 0)
            ):
                least = "> 0" if spec.name == "keepalive" else ">= 0"
                raise ValueError(
                    f"HttpLimits({spec.name}=...) must be a finite number of seconds {least}, "
                    f"got {value!r}"
                )


__all__ = ["HttpLimits"]
