"""The run channel contract on the in-process channel; PostgreSQL's runs it in its package."""

from __future__ import annotations

from pai.core.ext import InMemoryRunChannel, RunChannel
from pai.core.testing import RunChannelConformance


class TestInMemoryRunChannel(RunChannelConformance):
    def create_channel(self, *, retain_finished: float) -> RunChannel:
        return InMemoryRunChannel(retain_finished=retain_finished)
