"""Run one tool directly, with facades you supply: the tool-level test helper."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel, JsonValue, ValidationError

from pai.core._errors import DefinitionError, ToolCapabilitiesError
from pai.core._execution import execute_tool, validation_summary
from pai.core._messages import ToolResultMessage
from pai.core._operations import Capabilities, Tool, ToolContext

InputT = TypeVar("InputT", bound=BaseModel)
OutputT = TypeVar("OutputT")


@dataclass(frozen=True, slots=True)
class ToolRunResult(Generic[OutputT]):
    """The outcome of :func:`run_tool`: the saved result, and the output when it succeeded."""

    result: ToolResultMessage
    output: OutputT | None

    @property
    def is_error(self) -> bool:
        """Whether the tool failed (the model would have seen an error)."""
        return self.result.is_error

    def expect_output(self) -> OutputT:
        """The tool's return value; raises ``AssertionError`` with the error text if it failed."""
        if self.result.is_error:
            raise AssertionError(f"the tool failed: {self.result.content}")
        return self.output  # type: ignore[return-value]  # no error, so the tool returned


async def run_tool(
    tool: Tool[InputT, OutputT],
    *,
    input: InputT | Mapping[str, JsonValue],
    capabilities: Mapping[str, object] | None = None,
    thread_id: str = "test-thread",
    scope_key: str = "test-scope",
    user_key: str | None = None,
    identity: object = None,
    runtime_context: object = None,
) -> ToolRunResult[OutputT]:
    """Run ``tool`` once with the facades you pass, keyed by the tool's local capability names.

    ``capabilities`` is required exactly when the tool declares capabilities; fakes are welcome.
    ``runtime_context`` is what the tool reads at ``ctx.runtime_context`` (the value an agent's
    ``runtime_context`` function would compute).

    Example::

        sessions = create_sandbox_session_manager(provider=create_in_memory_sandbox_provider())
        ran = await run_tool(
            run_script,
            input={"command": "echo hi"},
            capabilities={"sandbox": create_sandbox(sessions.handle("t"))},
        )
        assert ran.expect_output().stdout == "hi\\n"
    """
    if tool.execute is None:
        raise DefinitionError(
            f"tool {tool.id!r} has no execute, so there is nothing to run; its results come from "
            "outside the runtime"
        )
    declared = tool.capabilities
    given = dict(capabilities or {})
    if declared and capabilities is None:
        raise ToolCapabilitiesError(
            f"tool {tool.id!r} declares capabilities {sorted(declared)}; pass "
            f"run_tool(..., capabilities={{{', '.join(f'{n!r}: <facade>' for n in declared)}}})"
        )
    if not declared and capabilities is not None:
        raise ToolCapabilitiesError(
            f"tool {tool.id!r} declares no capabilities; drop capabilities= from run_tool()"
        )
    missing = sorted(declared.keys() - given.keys())
    extra = sorted(given.keys() - declared.keys())
    if missing or extra:
        raise ToolCapabilitiesError(
            f"capabilities for tool {tool.id!r} must be keyed by its local names "
            f"{sorted(declared)}; missing: {missing}, unexpected: {extra}"
        )
    if isinstance(input, tool.input_schema):
        parsed = input
    else:
        try:
            parsed = tool.input_schema.model_validate(input)
        except ValidationError as error:
            raise DefinitionError(
                f"input for tool {tool.id!r} is invalid: {validation_summary(error)}"
            ) from error
    by_id = {declared[name].id: facade for name, facade in given.items()}
    ctx: ToolContext[Any, Any] = ToolContext(
        input=parsed,
        capabilities=Capabilities(given, by_id),
        thread_id=thread_id,
        tool_call_id="run-tool",
        scope_key=scope_key,
        user_key=user_key,
        identity=identity,
        runtime_context=runtime_context,
    )
    result, output = await execute_tool(tool, ctx, tool.id)
    return ToolRunResult(result, cast("OutputT | None", output))
