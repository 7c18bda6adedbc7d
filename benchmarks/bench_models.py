"""Model layer overhead against the raw openai SDK. Run:  uv run python benchmarks/bench_models.py

Both sides talk to the same local OpenAI-compatible test server (pai.model_openai.testing), in
the same run, interleaved, so the server's own cost is in both. The server runs in a process of its
own, as a model server does: in this process, its thread would contend for the GIL with the client,
so every time the client's event loop waits (a hand-over between two tasks, say) the server's
thread would run in between and the wait would cost a slice of the server's work; pass
``--server-in-process`` to measure that way too.

- a runtime step (``thread.send`` on a fresh thread: one model call answering with text, the
  thread's storage writes included) against the raw SDK call sending the same request
  (streamed, with usage, read to the end); target <= 1.1x.
- time to the first streamed token through the runtime (``thread.stream`` on a fresh thread:
  the first ``TextDelta`` it yields) against the raw SDK stream's first content chunk; target
  <= 1.1x. Each side reads its stream to the end.
- the same through ``OpenAIModel.stream`` alone (the model layer without the runtime).

Prints medians and ratios, for asyncio and trio (pass a backend name to run only one).
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import openai
from _verdict import verdict

from pai.core import ModelRequest, UserMessage, define_agent
from pai.core.ext import TextDelta
from pai.core.testing import create_test_runtime
from pai.model_openai import OpenAIModel
from pai.model_openai.testing import OpenAITestServer, text_answer

ROUNDS = 200
WARMUP = 20
INSTRUCTIONS = "You are terse."
PROMPT = "Say hello."


def _answer() -> Any:
    return text_answer("Hel", "lo", " there", "!")


ANSWERS = 5 * (ROUNDS + WARMUP)


def serve() -> None:
    """The server process: serve ``ANSWERS`` answers, print the base URL, stop at end of stdin."""
    with OpenAITestServer([_answer() for _ in range(ANSWERS)]) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


@contextlib.asynccontextmanager
async def answer_server(in_process: bool) -> AsyncIterator[str]:
    """The base URL of a test server with the benchmark's answers, in this process or its own."""
    if in_process:
        async with OpenAITestServer([_answer() for _ in range(ANSWERS)]) as server:
            yield server.base_url
        return
    process = await anyio.open_process([sys.executable, __file__, "--serve"])
    assert process.stdout is not None
    assert process.stdin is not None
    line = b""
    while not line.endswith(b"\n"):
        line += await process.stdout.receive(1)
    try:
        yield line.decode().strip()
    finally:
        await process.stdin.aclose()  # end of its stdin: the server stops
        await process.wait()


async def bench(backend: str, in_process: bool) -> None:
    async with answer_server(in_process) as base_url:
        raw = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
        model = OpenAIModel("bench-model", base_url=base_url, api_key="bench")
        agent = define_agent(name="bench", instructions=INSTRUCTIONS, model=model)
        messages: Any = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": PROMPT},
        ]
        request = ModelRequest(
            instructions=INSTRUCTIONS, messages=[UserMessage(content=PROMPT)], tools=[], step=1
        )

        async def raw_stream() -> tuple[float, float]:
            """Seconds to the first content chunk and to the end of one raw SDK stream."""
            start = time.perf_counter()
            stream = await raw.chat.completions.create(
                model="bench-model",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
            first = 0.0
            async for chunk in stream:
                if not first and chunk.choices and chunk.choices[0].delta.content:
                    first = time.perf_counter() - start
            return first, time.perf_counter() - start

        async def model_first_token() -> float:
            start = time.perf_counter()
            elapsed = 0.0
            async for event in model.stream(request):
                if not elapsed and isinstance(event, TextDelta):
                    elapsed = time.perf_counter() - start
            return elapsed

        async with create_test_runtime(agent=agent) as runtime:
            admin = runtime.admin(identity=None)

            async def runtime_step() -> float:
                thread = await admin.create_thread()
                start = time.perf_counter()
                await thread.send(PROMPT)
                return time.perf_counter() - start

            async def stream_first_token() -> float:
                thread = await admin.create_thread()
                start = time.perf_counter()
                elapsed = 0.0
                async for event in thread.stream(PROMPT):
                    if not elapsed and isinstance(event, TextDelta):
                        elapsed = time.perf_counter() - start
                return elapsed

            samples: dict[str, list[float]] = {
                "raw call": [],
                "runtime step": [],
                "raw first token": [],
                "model first token": [],
                "stream first token": [],
            }
            for round_ in range(ROUNDS + WARMUP):
                timings = (
                    (await raw_stream())[1],
                    await runtime_step(),
                    (await raw_stream())[0],
                    await model_first_token(),
                    await stream_first_token(),
                )
                if round_ >= WARMUP:
                    for name, value in zip(samples, timings, strict=True):
                        samples[name].append(value)
        await model.aclose()
        await raw.close()

    median = {name: statistics.median(values) for name, values in samples.items()}
    where = "in this process" if in_process else "in its own process"
    print(
        f"Model layer vs raw openai SDK ({backend}, server {where}), median of {ROUNDS} "
        "interleaved rounds"
    )
    for name, value in median.items():
        print(f"  {name:<20} {value * 1e3:8.3f} ms")
    step_ratio = median["runtime step"] / median["raw call"]
    ttft_ratio = median["stream first token"] / median["raw first token"]
    model_ratio = median["model first token"] / median["raw first token"]
    print(
        f"  runtime step / raw call:                    {step_ratio:5.3f}x {verdict(step_ratio, 1.1)}"
    )
    print(
        f"  thread.stream first token / raw first token: {ttft_ratio:5.3f}x {verdict(ttft_ratio, 1.1)}"
    )
    print(f"  model.stream first token / raw first token:  {model_ratio:5.3f}x")


def main() -> None:
    args = sys.argv[1:]
    if args == ["--serve"]:
        serve()
        return
    in_process = "--server-in-process" in args
    backends = [arg for arg in args if arg != "--server-in-process"]
    for backend in backends or ["asyncio", "trio"]:
        anyio.run(bench, backend, in_process, backend=backend)


if __name__ == "__main__":
    main()
