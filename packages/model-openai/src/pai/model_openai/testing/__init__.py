"""Test your agents offline, through the real ``openai`` SDK, against a local server.

:class:`OpenAITestServer` is an OpenAI-compatible Chat Completions server on 127.0.0.1 that
replays scripted answers (text, streamed chunks, tool calls, usage, and failures) and records the
requests it got. It can also play a hostile server (redirects, endless streams, huge lines,
trickled bytes, lying usage, HTML pages, thousands of tool calls) to check what your agent's host
does then. Install ``pai-model-openai[testing]`` (uvicorn). For pytest, add the fixture::

    # conftest.py
    pytest_plugins = ["pai.model_openai.testing.pytest_plugin"]

    def test_answers(openai_server: OpenAITestServer) -> None:
        openai_server.add(text_answer("hello"))
        model = OpenAIModel("test-model", base_url=openai_server.base_url, api_key="test")
"""

from pai.model_openai.testing._answers import Answer as Answer
from pai.model_openai.testing._answers import BadUsage as BadUsage
from pai.model_openai.testing._answers import CutStream as CutStream
from pai.model_openai.testing._answers import EndlessStream as EndlessStream
from pai.model_openai.testing._answers import ErrorAnswer as ErrorAnswer
from pai.model_openai.testing._answers import FunctionCall as FunctionCall
from pai.model_openai.testing._answers import HtmlAnswer as HtmlAnswer
from pai.model_openai.testing._answers import HugeLine as HugeLine
from pai.model_openai.testing._answers import MalformedChunk as MalformedChunk
from pai.model_openai.testing._answers import RecordedRequest as RecordedRequest
from pai.model_openai.testing._answers import RedirectAnswer as RedirectAnswer
from pai.model_openai.testing._answers import ScriptedAnswer as ScriptedAnswer
from pai.model_openai.testing._answers import StalledStream as StalledStream
from pai.model_openai.testing._answers import StreamError as StreamError
from pai.model_openai.testing._answers import TextAnswer as TextAnswer
from pai.model_openai.testing._answers import ToolCallsAnswer as ToolCallsAnswer
from pai.model_openai.testing._answers import TrickleStream as TrickleStream
from pai.model_openai.testing._answers import bad_usage as bad_usage
from pai.model_openai.testing._answers import cut_stream as cut_stream
from pai.model_openai.testing._answers import endless_stream as endless_stream
from pai.model_openai.testing._answers import error_answer as error_answer
from pai.model_openai.testing._answers import function_call as function_call
from pai.model_openai.testing._answers import html_answer as html_answer
from pai.model_openai.testing._answers import huge_line as huge_line
from pai.model_openai.testing._answers import malformed_chunk as malformed_chunk
from pai.model_openai.testing._answers import many_tool_calls as many_tool_calls
from pai.model_openai.testing._answers import redirect_answer as redirect_answer
from pai.model_openai.testing._answers import stalled_stream as stalled_stream
from pai.model_openai.testing._answers import stream_error as stream_error
from pai.model_openai.testing._answers import text_answer as text_answer
from pai.model_openai.testing._answers import tool_calls_answer as tool_calls_answer
from pai.model_openai.testing._answers import trickle_stream as trickle_stream
from pai.model_openai.testing._server import OpenAITestServer as OpenAITestServer

__all__ = [
    "Answer",
    "BadUsage",
    "CutStream",
    "EndlessStream",
    "ErrorAnswer",
    "FunctionCall",
    "HtmlAnswer",
    "HugeLine",
    "MalformedChunk",
    "OpenAITestServer",
    "RecordedRequest",
    "RedirectAnswer",
    "ScriptedAnswer",
    "StalledStream",
    "StreamError",
    "TextAnswer",
    "ToolCallsAnswer",
    "TrickleStream",
    "bad_usage",
    "cut_stream",
    "endless_stream",
    "error_answer",
    "function_call",
    "html_answer",
    "huge_line",
    "malformed_chunk",
    "many_tool_calls",
    "redirect_answer",
    "stalled_stream",
    "stream_error",
    "text_answer",
    "tool_calls_answer",
    "trickle_stream",
]
