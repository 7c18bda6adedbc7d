"""Definitions: define_tool, define_command, define_agent, the Capabilities view, the public API."""

from __future__ import annotations

import copy
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

import pytest
from pydantic import BaseModel

import pai.core
import pai.core.testing
from pai.core import (
    Agent,
    AssistantMessage,
    Capabilities,
    Capability,
    CapabilityConflictError,
    Command,
    CommandContext,
    DefinitionError,
    ModelRequest,
    Requirement,
    Tool,
    ToolContext,
    UndeclaredCapabilityError,
    define_agent,
    define_capability,
    define_command,
    define_tool,
)

# -- fixtures: facades, tokens, schemas, a model ------------------------------------------------


class Sandbox(Protocol):
    def run(self, command: str) -> str: ...


class OtherSandbox(Protocol):
    def execute(self, argv: list[str]) -> int: ...


class Vault(Protocol):
    def secret(self, name: str) -> str: ...


class FakeSandbox:
    def run(self, command: str) -> str:
        return f"ran {command}"


class FakeVault:
    def secret(self, name: str) -> str:
        return f"secret {name}"


sandbox = define_capability(Sandbox, id="sandbox")
vault = define_capability(Vault, id="acme.vault")


class RunInput(BaseModel):
    command: str


class NoInput(BaseModel):
    pass


@dataclass
class NotAModel:
    command: str


class EchoModel:
    async def request(self, request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(content="ok")


def untyped(value: object) -> Any:
    """Hide a deliberately wrong argument from the type checker: these tests check run time."""
    return cast(Any, value)


def run_in_sandbox(ctx: ToolContext[RunInput]) -> str:
    return ctx.capabilities.sandbox.run(ctx.input.command)


def tool_with(
    capabilities: Mapping[str, Capability[Any]] | None, id: str = "runScript"
) -> Tool[RunInput, str]:
    return define_tool(
        id=id,
        description="Run a command.",
        input_schema=RunInput,
        capabilities=capabilities,
        execute=lambda ctx: "done",
    )


def command_with(capabilities: Mapping[str, Capability[Any]] | None) -> Command[NoInput, None]:
    return define_command(input=NoInput, capabilities=capabilities, run=lambda ctx: None)


# -- define_tool -------------------------------------------------------------------------------


def test_define_tool_returns_a_tool_with_its_definition() -> None:
    tool = define_tool(
        id="runScript",
        description="Run a command.",
        input_schema=RunInput,
        capabilities={"sandbox": sandbox},
        execute=run_in_sandbox,
    )

    assert isinstance(tool, Tool)
    assert tool.id == "runScript"
    assert tool.description == "Run a command."
    assert tool.input_schema is RunInput
    assert tool.capabilities == {"sandbox": sandbox}
    assert tool.execute is run_in_sandbox


def test_a_tool_without_capabilities_declares_none() -> None:
    assert tool_with(None).capabilities == {}


def test_a_tool_without_execute_is_an_external_output_tool() -> None:
    tool = define_tool(id="askUser", description="Ask the user.", input_schema=RunInput)

    assert tool.execute is None
    assert tool.capabilities == {}


def test_a_tool_declaring_capabilities_without_execute_is_rejected_saying_what_to_do() -> None:
    with pytest.raises(DefinitionError) as caught:
        untyped(define_tool)(
            id="askUser",
            description="Ask the user.",
            input_schema=RunInput,
            capabilities={"sandbox": sandbox},
        )

    message = str(caught.value)
    assert "tool 'askUser'" in message
    assert "'sandbox'" in message
    assert "add execute=" in message
    assert "drop capabilities" in message


@pytest.mark.parametrize(
    "schema", [dict, NotAModel, RunInput(command="x"), {"command": "string"}, None], ids=repr
)
def test_a_tool_input_schema_must_be_a_pydantic_model_class(schema: object) -> None:
    with pytest.raises(
        DefinitionError, match="input_schema must be a pydantic BaseModel"
    ) as caught:
        define_tool(
            id="runScript",
            description="Run a command.",
            input_schema=untyped(schema),
            execute=lambda ctx: None,
        )

    assert "tool 'runScript'" in str(caught.value)


@pytest.mark.parametrize("name", ["my-box", "1box", "", "box name", "box.sub"])
def test_a_tool_capability_name_must_be_an_identifier(name: str) -> None:
    with pytest.raises(DefinitionError, match="must be a Python identifier") as caught:
        tool_with({name: sandbox})

    assert f"capability name {name!r}" in str(caught.value)
    assert "tool 'runScript'" in str(caught.value)


@pytest.mark.parametrize("value", ["sandbox", Sandbox, FakeSandbox()], ids=repr)
def test_a_tool_capability_must_be_a_token(value: object) -> None:
    with pytest.raises(DefinitionError, match=r"capabilities\['box'\] must be a token"):
        tool_with({"box": untyped(value)})


def test_a_tool_capabilities_must_be_a_mapping() -> None:
    with pytest.raises(DefinitionError, match="mapping of local name to token"):
        tool_with(untyped([sandbox]))


def test_a_tool_may_alias_a_token_under_another_local_name() -> None:
    tool = tool_with({"box": sandbox})

    assert tool.capabilities == {"box": sandbox}
    assert tool.capabilities["box"].id == "sandbox"


def test_a_tool_may_not_declare_one_capability_id_under_two_names() -> None:
    with pytest.raises(DefinitionError, match=r"\['sandbox'\] are declared under more than one"):
        tool_with({"box": sandbox, "sandbox": sandbox})


def test_a_tool_id_must_be_a_non_empty_string() -> None:
    with pytest.raises(DefinitionError, match="define_tool"):
        tool_with(None, id="")


def test_a_tool_execute_must_be_callable() -> None:
    with pytest.raises(DefinitionError, match="execute must be callable"):
        define_tool(id="runScript", description="d", input_schema=RunInput, execute=untyped("run"))


# -- define_command ----------------------------------------------------------------------------


def test_define_command_returns_a_command_with_its_definition() -> None:
    def reset(ctx: CommandContext[NoInput]) -> None:
        return None

    command = define_command(
        input=NoInput, capabilities={"box": sandbox}, run=reset, description="Reset it."
    )

    assert isinstance(command, Command)
    assert command.input is NoInput
    assert command.capabilities == {"box": sandbox}
    assert command.run is reset
    assert command.description == "Reset it."


def test_a_command_without_capabilities_declares_none() -> None:
    assert command_with(None).capabilities == {}


@pytest.mark.parametrize("schema", [dict, NotAModel, NoInput()], ids=repr)
def test_a_command_input_must_be_a_pydantic_model_class(schema: object) -> None:
    with pytest.raises(DefinitionError, match="input must be a pydantic BaseModel"):
        define_command(input=untyped(schema), run=lambda ctx: None)


def test_a_command_run_must_be_callable() -> None:
    with pytest.raises(DefinitionError, match=r"run=\.\.\.\) must be callable"):
        define_command(input=NoInput, run=untyped(None))


def test_a_command_capability_name_must_be_an_identifier() -> None:
    with pytest.raises(DefinitionError, match="capability name 'my-box'"):
        command_with({"my-box": sandbox})


# -- define_agent: shape -----------------------------------------------------------------------


def test_define_agent_defaults() -> None:
    agent = define_agent(name="coder")

    assert isinstance(agent, Agent)
    assert agent.name == "coder"
    assert agent.model is None
    assert agent.instructions == ""
    assert agent.max_steps == 20
    assert agent.tools == {}
    assert agent.commands == {}
    assert agent.subagents == {}
    assert agent.requirements == {}


def test_define_agent_accepts_a_model() -> None:
    model = EchoModel()

    assert define_agent(name="coder", model=model).model is model


@pytest.mark.parametrize(
    "model", [object(), "gpt-4o", FakeSandbox(), EchoModel], ids=["object", "str", "other", "cls"]
)
def test_define_agent_rejects_a_model_without_a_request_method(model: object) -> None:
    with pytest.raises(DefinitionError, match="agent 'coder': model") as caught:
        define_agent(name="coder", model=untyped(model))

    assert repr(model) in str(caught.value)


@pytest.mark.parametrize("max_steps", [0, -1, 1.5, "5", None, True])
def test_define_agent_rejects_a_max_steps_that_is_not_a_positive_int(max_steps: object) -> None:
    with pytest.raises(DefinitionError, match="max_steps must be a positive int") as caught:
        define_agent(name="coder", max_steps=untyped(max_steps))

    assert f"got {max_steps!r}" in str(caught.value)


def test_define_agent_accepts_a_max_steps_of_one() -> None:
    assert define_agent(name="coder", max_steps=1).max_steps == 1


def test_define_agent_rejects_an_empty_name() -> None:
    with pytest.raises(DefinitionError, match="name"):
        define_agent(name="")


def test_define_agent_rejects_a_tool_not_made_by_define_tool() -> None:
    with pytest.raises(DefinitionError, match=r"tools\['run'\] must come from define_tool"):
        define_agent(name="coder", tools={"run": untyped(run_in_sandbox)})


def test_define_agent_rejects_a_command_not_made_by_define_command() -> None:
    with pytest.raises(DefinitionError, match=r"commands\['reset'\] must come from define_command"):
        define_agent(name="coder", commands={"reset": untyped(lambda ctx: None)})


def test_define_agent_rejects_a_subagent_not_made_by_define_agent() -> None:
    with pytest.raises(DefinitionError, match=r"subagents\['helper'\] must come from define_agent"):
        define_agent(name="coder", subagents={"helper": untyped("helper")})


def test_define_agent_rejects_a_command_name_that_is_not_an_identifier() -> None:
    with pytest.raises(DefinitionError, match="command name 'reset-workspace'"):
        define_agent(name="coder", commands={"reset-workspace": command_with(None)})


def test_define_agent_rejects_a_name_used_by_both_a_tool_and_a_subagent() -> None:
    helper = define_agent(name="helper")

    with pytest.raises(DefinitionError, match="'research' names both a tool and a subagent"):
        define_agent(
            name="coder",
            tools={"research": tool_with(None)},
            subagents={"research": helper},
        )


def test_with_model_returns_a_copy_using_the_new_model() -> None:
    agent = define_agent(name="coder", tools={"runScript": tool_with({"sandbox": sandbox})})
    model = EchoModel()

    swapped = agent.with_model(model)

    assert swapped is not agent
    assert swapped.model is model
    assert agent.model is None
    assert swapped.tools == agent.tools
    assert swapped.requirements == agent.requirements


# -- define_agent: requirement folding ---------------------------------------------------------


def test_an_agent_without_capabilities_requires_nothing() -> None:
    agent = define_agent(
        name="coder", tools={"runScript": tool_with(None)}, commands={"reset": command_with(None)}
    )

    assert agent.requirements == {}


def test_define_agent_folds_every_declaration_into_one_id_keyed_map() -> None:
    agent = define_agent(
        name="coder",
        tools={
            "runScript": tool_with({"sandbox": sandbox}),
            "listDir": tool_with({"box": sandbox}),
            "lookup": tool_with({"vault": vault}),
            "plain": tool_with(None),
        },
        commands={"reset": command_with({"sandbox": sandbox})},
    )

    assert agent.requirements == {
        "sandbox": Requirement(
            capability=sandbox,
            declared_by=("tool 'runScript'", "tool 'listDir'", "command 'reset'"),
        ),
        "acme.vault": Requirement(capability=vault, declared_by=("tool 'lookup'",)),
    }


def test_requirements_are_keyed_by_token_id_not_local_name() -> None:
    agent = define_agent(name="coder", tools={"listDir": tool_with({"box": sandbox})})

    assert set(agent.requirements) == {"sandbox"}


def test_one_operation_declaring_two_capabilities_appears_in_both_requirements() -> None:
    agent = define_agent(
        name="coder", tools={"deploy": tool_with({"sandbox": sandbox, "vault": vault})}
    )

    assert agent.requirements["sandbox"].declared_by == ("tool 'deploy'",)
    assert agent.requirements["acme.vault"].declared_by == ("tool 'deploy'",)


def test_two_tokens_with_one_id_and_one_facade_share_one_requirement() -> None:
    twin = define_capability(Sandbox, id="sandbox", description="declared again elsewhere")
    assert twin is not sandbox

    agent = define_agent(
        name="coder",
        tools={"a": tool_with({"sandbox": sandbox}), "b": tool_with({"box": twin})},
    )

    assert list(agent.requirements) == ["sandbox"]
    assert agent.requirements["sandbox"].declared_by == ("tool 'a'", "tool 'b'")
    assert agent.requirements["sandbox"].capability.facade is Sandbox


def test_two_tokens_with_one_id_and_different_facades_conflict_naming_both_sides() -> None:
    impostor = define_capability(OtherSandbox, id="sandbox")

    with pytest.raises(CapabilityConflictError) as caught:
        define_agent(
            name="coder",
            tools={"a": tool_with({"sandbox": sandbox}), "b": tool_with({"sandbox": impostor})},
        )

    message = str(caught.value)
    assert "'sandbox'" in message
    assert "tool 'a'" in message
    assert "tool 'b'" in message
    assert f"{__name__}.Sandbox" in message
    assert f"{__name__}.OtherSandbox" in message


def test_a_capability_conflict_is_a_definition_error() -> None:
    impostor = define_capability(OtherSandbox, id="sandbox")

    with pytest.raises(DefinitionError):
        define_agent(
            name="coder",
            tools={"a": tool_with({"sandbox": sandbox})},
            commands={"reset": command_with({"sandbox": impostor})},
        )


def test_a_subclass_facade_under_the_same_id_still_conflicts() -> None:
    # One id must mean one facade type; "compatible" look-alikes are still two meanings.
    class RichSandbox(FakeSandbox):
        pass

    plain = define_capability(FakeSandbox, id="sandbox")
    rich = define_capability(RichSandbox, id="sandbox")

    with pytest.raises(CapabilityConflictError):
        define_agent(
            name="coder", tools={"a": tool_with({"s": plain}), "b": tool_with({"s": rich})}
        )


def test_subagent_requirements_fold_into_the_parent() -> None:
    helper = define_agent(name="helper", tools={"runScript": tool_with({"sandbox": sandbox})})

    agent = define_agent(
        name="coder",
        tools={"lookup": tool_with({"vault": vault})},
        subagents={"delegate": helper},
    )

    assert agent.requirements == {
        "acme.vault": Requirement(capability=vault, declared_by=("tool 'lookup'",)),
        "sandbox": Requirement(
            capability=sandbox, declared_by=("subagent 'delegate' tool 'runScript'",)
        ),
    }


def test_nested_subagent_requirements_fold_all_the_way_up() -> None:
    leaf = define_agent(name="leaf", commands={"reset": command_with({"sandbox": sandbox})})
    middle = define_agent(name="middle", subagents={"leaf": leaf})

    top = define_agent(
        name="top", tools={"runScript": tool_with({"box": sandbox})}, subagents={"mid": middle}
    )

    assert top.requirements["sandbox"].declared_by == (
        "tool 'runScript'",
        "subagent 'mid' subagent 'leaf' command 'reset'",
    )


def test_a_subagent_facade_conflicting_with_the_parent_is_rejected() -> None:
    helper = define_agent(
        name="helper",
        tools={"run": tool_with({"s": define_capability(OtherSandbox, id="sandbox")})},
    )

    with pytest.raises(CapabilityConflictError) as caught:
        define_agent(
            name="coder",
            tools={"runScript": tool_with({"sandbox": sandbox})},
            subagents={"delegate": helper},
        )

    assert "tool 'runScript'" in str(caught.value)
    assert "subagent 'delegate' tool 'run'" in str(caught.value)


# -- Capabilities: what ctx.capabilities is --------------------------------------------------


def capabilities_for(
    declared: Mapping[str, Capability[Any]], facades_by_id: Mapping[str, object]
) -> Capabilities:
    """The view the runtime builds for one operation: local names and token ids, same facades."""
    by_name = {name: facades_by_id[token.id] for name, token in declared.items()}
    return Capabilities(by_name, dict(facades_by_id))


def test_a_facade_is_reachable_by_token_and_by_local_name() -> None:
    box = FakeSandbox()
    caps = capabilities_for({"sandbox": sandbox}, {"sandbox": box})

    assert caps[sandbox] is box
    assert caps.sandbox is box


def test_an_aliased_facade_is_reachable_by_its_alias_and_its_token_but_not_its_id() -> None:
    box = FakeSandbox()
    caps = capabilities_for({"box": sandbox}, {"sandbox": box})

    assert caps.box is box
    assert caps[sandbox] is box
    with pytest.raises(AttributeError):
        _ = caps.sandbox


def test_any_token_with_the_declared_id_finds_the_facade() -> None:
    box = FakeSandbox()
    caps = capabilities_for({"sandbox": sandbox}, {"sandbox": box})

    assert caps[define_capability(Sandbox, id="sandbox")] is box


def test_a_tool_execute_reads_its_facades_from_ctx_capabilities() -> None:
    tool = define_tool(
        id="runScript",
        description="Run a command.",
        input_schema=RunInput,
        capabilities={"box": sandbox, "vault": vault},
        execute=lambda ctx: (
            ctx.capabilities.box.run(ctx.input.command),
            ctx.capabilities[vault].secret("token"),
        ),
    )
    ctx = ToolContext(
        input=RunInput(command="ls"),
        capabilities=capabilities_for(
            tool.capabilities, {"sandbox": FakeSandbox(), "acme.vault": FakeVault()}
        ),
        thread_id="t",
        tool_call_id="c",
        scope_key="s",
        user_key=None,
        identity=None,
    )

    assert tool.execute is not None
    assert tool.execute(ctx) == ("ran ls", "secret token")


def test_an_undeclared_token_is_a_key_error_listing_what_was_declared() -> None:
    caps = capabilities_for({"box": sandbox}, {"sandbox": FakeSandbox()})

    with pytest.raises(UndeclaredCapabilityError) as caught:
        _ = caps[vault]

    assert isinstance(caught.value, KeyError)
    message = str(caught.value)
    assert "capability 'acme.vault' was not declared" in message
    assert "capabilities={...}" in message
    assert "declared: ['sandbox']" in message


def test_an_undeclared_name_is_an_attribute_error_listing_the_declared_names() -> None:
    caps = capabilities_for({"box": sandbox, "vault": vault}, {"sandbox": 1, "acme.vault": 2})

    with pytest.raises(AttributeError) as caught:
        _ = caps.sandbox

    assert str(caught.value) == (
        "no capability named 'sandbox' on this operation; declared names: ['box', 'vault']"
    )


def test_an_operation_without_capabilities_says_none_were_declared() -> None:
    caps = Capabilities({}, {})

    with pytest.raises(AttributeError, match="declared names: none"):
        _ = caps.sandbox
    with pytest.raises(KeyError) as caught:
        _ = caps[sandbox]
    assert "declared: none" in caught.value.args[0]


def test_capabilities_iterate_contain_and_count_local_names() -> None:
    caps = capabilities_for({"box": sandbox, "vault": vault}, {"sandbox": 1, "acme.vault": 2})

    assert sorted(caps) == ["box", "vault"]
    assert len(caps) == 2
    assert "box" in caps
    assert "sandbox" not in caps
    assert not hasattr(caps, "sandbox")


def test_capabilities_can_be_copied() -> None:
    # copy/deepcopy build the object before filling its slots; attribute lookups then must not
    # recurse through __getattr__.
    box = FakeSandbox()
    caps = capabilities_for({"box": sandbox}, {"sandbox": box})

    shallow = copy.copy(caps)
    deep = copy.deepcopy(caps)

    assert shallow.box is box
    assert shallow[sandbox] is box
    assert isinstance(deep.box, FakeSandbox)


# -- the public API ----------------------------------------------------------------------------


@pytest.mark.parametrize("module", [pai.core, pai.core.testing], ids=lambda m: m.__name__)
def test_all_exports_exactly_the_public_names_sorted(module: types.ModuleType) -> None:
    # dir() includes what a module exports lazily (pai.core.testing's conformance suites).
    public = {
        name
        for name in dir(module)
        if not name.startswith("_")
        and name != "TYPE_CHECKING"
        and not isinstance(getattr(module, name), types.ModuleType)
    }
    exported: list[str] = module.__all__

    assert exported == sorted(exported)
    assert len(exported) == len(set(exported))
    assert set(exported) == public


class _Report(BaseModel):
    title: str
    pages: int


def _render(report: _Report) -> str:
    return f"# {report.title} ({report.pages} pages)"


async def _make_report(ctx: ToolContext[RunInput, Any]) -> _Report:
    return _Report(title=ctx.input.command, pages=3)


def test_a_tool_to_model_text_must_be_callable() -> None:
    with pytest.raises(DefinitionError, match="to_model_text must be a function"):
        define_tool(
            id="report",
            description="d",
            input_schema=RunInput,
            execute=_make_report,
            to_model_text="# report",  # type: ignore[arg-type]
        )


@pytest.mark.anyio
async def test_to_model_text_gives_the_text_the_model_reads_and_the_output_is_saved_as_json() -> (
    None
):
    report = define_tool(
        id="report",
        description="d",
        input_schema=RunInput,
        execute=_make_report,
        to_model_text=_render,
    )

    ran = await pai.core.testing.run_tool(report, input={"command": "Q3"})

    assert ran.result.content == "# Q3 (3 pages)"
    assert ran.result.output == {"title": "Q3", "pages": 3}
    assert ran.expect_output() == _Report(title="Q3", pages=3)


@pytest.mark.anyio
async def test_without_to_model_text_the_model_reads_the_outputs_json() -> None:
    report = define_tool(id="report", description="d", input_schema=RunInput, execute=_make_report)

    ran = await pai.core.testing.run_tool(report, input={"command": "Q3"})

    assert ran.result.content == '{"title":"Q3","pages":3}'


@pytest.mark.anyio
@pytest.mark.parametrize(
    "to_model_text",
    [lambda _: 42, lambda _: 1 / 0],
    ids=["returns-an-int", "raises"],
)
async def test_a_failing_to_model_text_is_a_failed_tool_call(to_model_text: Any) -> None:
    report = define_tool(
        id="report",
        description="d",
        input_schema=RunInput,
        execute=_make_report,
        to_model_text=to_model_text,
    )

    ran = await pai.core.testing.run_tool(report, input={"command": "Q3"})

    assert ran.is_error
    assert "tool 'report' failed" in ran.result.content
