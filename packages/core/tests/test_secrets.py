"""What counts as a secret, and how it is masked wherever PAI prints it."""

from __future__ import annotations

import time

import pytest

from pai.core._secrets import (
    MASK,
    config_secrets,
    looks_like_env_name,
    looks_like_secret,
    mask_text,
    mask_value,
    secret_key,
)

KEY = "sk-proj-Zq81xTfA0b9Kc2LmQ77vWbN4"


@pytest.mark.parametrize(
    "name",
    ["api_key", "apiKey", "token", "auth_token", "client_secret", "password", "db-passwd", "key"],
)
def test_keys_named_like_secrets_are_secret(name: str) -> None:
    assert secret_key(name)


@pytest.mark.parametrize(
    "name", ["api_key_env", "provider", "max_tokens", "keyboard", "monkey", "base_url", "image"]
)
def test_other_keys_are_not(name: str) -> None:
    assert not secret_key(name)


def test_values_are_masked_by_key_by_url_and_by_shape() -> None:
    assert mask_value("api_key", "anything") == MASK
    assert mask_value("password", 1234) == MASK
    assert mask_value("api_key", None) is None
    assert mask_value("api_key_env", "OPENAI_API_KEY") == "OPENAI_API_KEY"
    assert mask_value("api_key_env", KEY) == MASK
    assert mask_value("api_key_env", "not a name") == MASK
    assert mask_value("url", "postgresql://me:pw@db:5432/x") == "postgresql://me:***@db:5432/x"
    assert mask_value("headers", {"Authorization": "Bearer x", "Accept": "json"}) == {
        "Authorization": MASK,
        "Accept": "json",
    }
    assert mask_value("note", f"use {KEY} here") == f"use {MASK} here"
    assert mask_value("image", "python:3.12-slim") == "python:3.12-slim"


def test_names_hashes_and_paths_are_not_taken_for_secrets() -> None:
    for text in [
        "OPENAI_API_KEY",
        "MY_VERY_LONG_GATEWAY_VARIABLE_NAME_2",
        "3f2a9c1e-8d4b-4c6a-9e2f-1a2b3c4d5e6f",
        "/tmp/pytest-of-root/pytest-12/test_config_check0/work/pai.toml",
        "ModelConfigurationError",
    ]:
        assert not looks_like_secret(text), text
        assert mask_text(text) == text
    assert looks_like_env_name("OPENAI_API_KEY")
    assert not looks_like_env_name(KEY)
    assert not looks_like_env_name("sk_live_Zq81xTfA0b9Kc2LmQ77vWbN4")


def test_messages_lose_given_secrets_environment_secrets_and_token_shapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACME_TOKEN", "plainwordsecret")
    text = (
        f"refused {KEY}; tried https://bob:letmein99@host/x; token plainwordsecret; "
        "and the configured hunter22"
    )

    masked = mask_text(text, ["hunter22"])

    for secret in (KEY, "letmein99", "plainwordsecret", "hunter22"):
        assert secret not in masked
    assert "https://bob:***@host/x" in masked


def test_config_secrets_finds_values_at_secret_keys_and_url_passwords() -> None:
    data = {
        "model": {"openai": {"api_key_env": KEY, "base_url": "http://u:pw-123456@h/v1"}},
        "capabilities": {"sandbox": {"e2b": {"api_key": "e2b-abcdef"}, "image": "x"}},
    }

    assert sorted(config_secrets(data)) == sorted([KEY, "pw-123456", "e2b-abcdef"])


def test_names_that_share_a_token_prefix_are_not_masked() -> None:
    for text in ["e2b_emulator", "the e2b-sandbox-id label", "sk-learn", "hf_hub_cache", "pk_id"]:
        assert mask_text(text) == text
    assert mask_text("e2b_0123456789abcdef0123456789abcdef") == MASK
    assert mask_text("ghp_Zq81xTfA0b9Kc2LmQ77vWbN4aa") == MASK


@pytest.mark.parametrize(
    "text",
    ["x" * 1_000_000, "a://u:" * 160_000, "x" * 999_000 + "http://u:pw-secret@h"],
    ids=["one-run", "many-schemes", "url-at-the-end"],
)
def test_masking_a_megabyte_takes_linear_time(text: str) -> None:
    started = time.monotonic()
    masked = mask_text(text)

    assert time.monotonic() - started < 20  # quadratic took minutes
    assert "pw-secret" not in masked
