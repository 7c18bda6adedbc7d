"""Chunk fields to model events: the cases the test server does not script."""

from __future__ import annotations

import pytest

from pai.core import ModelConnectionError, ModelResponseError
from pai.core.ext import ResponseFinished, ToolCallStarted
from pai.model_openai._chat import ChunkReader


def test_a_stream_that_ends_without_a_finish_reason_counts_as_cut() -> None:
    reader = ChunkReader("m")
    list(reader.text("partial"))
    with pytest.raises(ModelConnectionError, match="ended before the answer finished"):
        list(reader.end())


def test_a_tool_call_without_an_id_gets_one_made_up_from_its_index() -> None:
    reader = ChunkReader("m")
    assert list(reader.tool_call(1, None, "read", None)) == [
        ToolCallStarted(index=1, id="call_1", name="read")
    ]


def test_a_tool_call_started_without_a_name_is_a_response_error() -> None:
    with pytest.raises(ModelResponseError, match="without a function name"):
        list(ChunkReader("m").tool_call(0, "c1", None, "{}"))


def test_an_unknown_finish_reason_is_other() -> None:
    reader = ChunkReader("m")
    list(reader.finish("something_new"))
    assert list(reader.end()) == [ResponseFinished("other")]
