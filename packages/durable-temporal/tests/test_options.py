"""TemporalOptions: the defaults, what is refused with which message, and that no repr or message
shows the API key."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from pai.core import ConfigError
from pai.durable_temporal import DEFAULT_TARGET_HOST, TemporalEngine, TemporalOptions

SECRET = "tc-s3cret-key"


def test_defaults() -> None:
    options = TemporalOptions()
    assert options.target_host == DEFAULT_TARGET_HOST == "127.0.0.1:7233"
    assert options.namespace == "default"
    assert options.task_queue == "pai"
    assert options.api_key is None
    assert options.use_tls is False
    assert options.step_timeout == 600
    assert options.heartbeat_timeout == 10
    assert options.identity is None
    assert TemporalEngine(options).name == "temporal"


def test_an_api_key_turns_tls_on_unless_told_otherwise() -> None:
    assert TemporalOptions(api_key=SecretStr(SECRET)).use_tls is True
    assert TemporalOptions(api_key=SecretStr(SECRET), tls=False).use_tls is False
    assert TemporalOptions(tls=True).use_tls is True


def test_the_api_key_is_never_shown() -> None:
    options = TemporalOptions(api_key=SecretStr(SECRET), target_host="ns.acct.tmprl.cloud:7233")
    assert SECRET not in repr(options)
    assert SECRET not in repr(TemporalEngine(options))
    assert SECRET not in str(options.model_dump())
    assert options.api_key is not None
    assert options.api_key.get_secret_value() == SECRET
    with pytest.raises(ConfigError) as caught:
        TemporalEngine(api_key=SECRET, target_host="no port")
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"target_host": "localhost"}, "must be host:port"),
        ({"target_host": "http://localhost:7233"}, "without a scheme"),
        ({"namespace": ""}, "without spaces"),
        ({"task_queue": "a queue"}, "without spaces"),
        ({"api_key": "  "}, "api_key is empty"),
        ({"identity": " "}, "identity must not be empty"),
        ({"step_timeout": 0}, "1 to 86400"),
        ({"step_timeout": float("inf")}, "1 to 86400"),
        ({"heartbeat_timeout": 0.5}, "1 to 3600"),
        ({"shutdown_grace": -1}, "0 to 3600"),
        ({"queue": "x"}, "queue: Extra inputs are not permitted"),
    ],
)
def test_bad_options_are_refused_by_name(options: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError, match="TemporalEngine options") as caught:
        TemporalEngine(**options)
    assert expected in str(caught.value)


def test_options_and_keywords_are_not_mixed() -> None:
    with pytest.raises(TypeError, match="not both"):
        TemporalEngine(TemporalOptions(), task_queue="other")


def test_options_are_frozen() -> None:
    options = TemporalOptions()
    with pytest.raises(ValidationError):
        options.task_queue = "other"


def test_importing_the_package_does_not_import_temporal() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pai.durable_temporal as p; p.TemporalOptions; p.TemporalEngine();"
        "import pai.durable_temporal._plugin;"
        "print(any(m == 'temporalio' or m.startswith('temporalio.') for m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"
