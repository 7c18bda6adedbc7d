"""Model layer overhead against the raw openai SDK. Run:  uv run python benchmarks/bench_models.py

Both sides talk to the same local OpenAI-compatible test server (pai.model_openai.testing), in
the same run, interleaved, so the server's own cost is in both:

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

import statistics
import sys
import time
from typing import Any

import anyio
import openai

from pai.core import ModelRequest, TextDelta, UserMessage, define_agent
from pai.core.testing import create_test_runtime
from pai.model_openai import OpenAIModel
from pai.model_openai.testing import OpenAITestServer, text_answer

ROUNDS = 200
WARMUP = 20
INSTRUCTIONS = "You are terse."
PROMPT = "Say hello."


def _answer() -> Any:
    return text_answer("Hel", "lo", " there", "!")


async def bench(backend: str) -> None:
    async with OpenAITestServer() as server:
        server.add(*[_answer() for _ in range(5 * (ROUNDS + WARMUP))])
        raw = openai.AsyncOpenAI(base_url=server.base_url, api_key="bench", max_retries=0)
        model = OpenAIModel("bench-model", base_url=server.base_url, api_key="bench")
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
    print(f"Model layer vs raw openai SDK ({backend}), median of {ROUNDS} interleaved rounds")
    for name, value in median.items():
        print(f"  {name:<20} {value * 1e3:8.3f} ms")
    step_ratio = median["runtime step"] / median["raw call"]
    ttft_ratio = median["stream first token"] / median["raw first token"]
    model_ratio = median["model first token"] / median["raw first token"]
    print(f"  runtime step / raw call:                    {step_ratio:5.2f}x (target <= 1.10x)")
    print(f"  thread.stream first token / raw first token: {ttft_ratio:5.2f}x (target <= 1.10x)")
    print(f"  model.stream first token / raw first token:  {model_ratio:5.2f}x")


def main() -> None:
    for backend in sys.argv[1:] or ["asyncio", "trio"]:
        anyio.run(bench, backend, backend=backend)


if __name__ == "__main__":
    main()
