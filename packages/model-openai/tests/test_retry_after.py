"""Reading how long a server asks the client to wait."""

from __future__ import annotations

import pytest

from pai.model_openai import parse_retry_after


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"Retry-After": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Thu, 01 Jan 1970 00:00:10 GMT"}, 4.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-1"}, None),
        ({}, None),
    ],
)
def test_retry_after_is_read_from_ms_seconds_or_an_http_date(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert parse_retry_after(headers, now=6.0) == seconds
