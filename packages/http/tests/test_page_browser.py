"""The chat page in a real browser: Debian's Chromium, headless, driven by playwright.

It opens the page on a live server, sends a message, waits for the streamed answer after a tool
call, and checks what a person sees; a screenshot is kept (under the test's folder, and under
PAI_TEST_ARTIFACTS when set, for CI). Without Chromium the test skips, unless
PAI_REQUIRE_CHROMIUM=1 (CI), where it fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from http_helpers import Served

from pai.http import HttpLimits


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found is not None:
            return found
    if os.environ.get("PAI_REQUIRE_CHROMIUM") == "1":
        pytest.fail("Chromium is required here (PAI_REQUIRE_CHROMIUM=1) but not on PATH")
    pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")


def test_a_person_chats_with_the_agent_and_sees_the_tool_call(
    make_server: Callable[..., Served], tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    executable = chromium()
    server = make_server(HttpLimits(reattach_grace=0.5), chat_page=True)
    # The test app authenticates by bearer token: the browser sends it with every request, as
    # a proxy in front of the page would.
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            context = browser.new_context(extra_http_headers={"Authorization": "Bearer token-acme"})
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(server.url + "/")
            page.wait_for_selector("#agent option[value='coder']", state="attached")
            page.fill("#message", "please run it")
            page.keyboard.press("Enter")
            page.wait_for_selector("text=ran it: output of 'echo hi': hi", timeout=15_000)
            tool = page.locator(".tool").first
            assert tool.locator("summary").inner_text().strip() == "tool: runScript"
            assert '"command": "echo hi"' in tool.locator(".args").inner_text()
            assert "output of 'echo hi': hi" in tool.locator(".result").inner_text()
            page.wait_for_selector("#threads button", timeout=5_000)
            shot = tmp_path / "chat-page.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 1000
            artifacts = os.environ.get("PAI_TEST_ARTIFACTS")
            if artifacts:
                Path(artifacts).mkdir(parents=True, exist_ok=True)
                shutil.copy(shot, Path(artifacts) / shot.name)
            assert errors == []
            # The model's text is shown as text, never as HTML.
            assert page.locator(".msg.assistant script").count() == 0
        finally:
            browser.close()
