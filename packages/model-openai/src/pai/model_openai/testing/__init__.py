"""Test your agents offline, through the real ``openai`` SDK, against a local server.

:class:`OpenAITestServer` is an OpenAI-compatible Chat Completions server on 127.0.0.1 that
replays scripted answers (text, streamed chunks, tool calls, usage, and failures) and records the
requests it got. Install ``pai-model-openai[testing]`` (uvicorn). For pytest, add the fixture::

    # conftest.py
    pytest_plugins = ["pai.model_openai.testing.pytest_plugin"]

    def test_answers(openai_server: OpenAITestServer) -> None:
        openai_server.add(text_answer("hello"))
        model = OpenAIModel("test-model", base_url=openai_server.base_url, api_key="test")
"""

from pai.model_openai.testing._answers import Answer as Answer
from pai.model_openai.testing._answers import CutStream as CutStream
from pai.model_openai.testing._answers import ErrorAnswer as ErrorAnswer
from pai.model_openai.testing._answers import FunctionCall as FunctionCall
from pai.model_openai.testing._answers import MalformedChunk as MalformedChunk
from pai.model_openai.testing._answers import RecordedRequest as RecordedRequest
from pai.model_openai.testing._answers import ScriptedAnswer as ScriptedAnswer
from pai.model_openai.testing._answers import StalledStream as StalledStream
from pai.model_openai.testing._answers import StreamError as StreamError
from pai.model_openai.testing._answers import TextAnswer as TextAnswer
from pai.model_openai.testing._answers import ToolCallsAnswer as ToolCallsAnswer
from pai.model_openai.testing._answers import cut_stream as cut_stream
from pai.model_openai.testing._answers import error_answer as error_answer
from pai.model_openai.testing._answers import function_call as function_call
from pai.model_openai.testing._answers import malformed_chunk as malformed_chunk
from pai.model_openai.testing._answers import stalled_stream as stalled_stream
from pai.model_openai.testing._answers import stream_error as stream_error
from pai.model_openai.testing._answers import text_answer as text_answer
from pai.model_openai.testing._answers import tool_calls_answer as tool_calls_answer
from pai.model_openai.testing._server import OpenAITestServer as OpenAITestServer

__all__ = [
    "Answer",
    "CutStream",
    "ErrorAnswer",
    "FunctionCall",
    "MalformedChunk",
    "OpenAITestServer",
    "RecordedRequest",
    "ScriptedAnswer",
    "StalledStream",
    "StreamError",
    "TextAnswer",
    "ToolCallsAnswer",
    "cut_stream",
    "error_answer",
    "function_call",
    "malformed_chunk",
    "stalled_stream",
    "stream_error",
    "text_answer",
    "tool_calls_answer",
]
