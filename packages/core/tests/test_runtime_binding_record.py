"""The binding record is checked when a runtime is built, and every problem is reported at once."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from helpers import (
    Box,
    OtherFacade,
    RecordingBinding,
    box_capability,
    build_agent,
    record,
    scope_of,
    use_command,
    use_tool,
)

from pai.core import (
    Agent,
    AgentRuntime,
    Capability,
    CapabilityBindingError,
    InMemoryStorage,
    create_agent_runtime,
    create_capability_binding,
    create_pai,
    define_capability,
)

alpha = box_capability("alpha")
beta = box_capability("beta")
gamma = box_capability("gamma")
delta = box_capability("delta")
extra = box_capability("extra")


class SpecialBox(Box):
    """A facade subtype: a binding for it can serve operations that need a Box."""


def needs(*tokens: Capability[Box]) -> Agent:
    return build_agent(tools={"use": use_tool(*tokens)})


def build(agent: Agent, capabilities: Mapping[str, object] | None) -> AgentRuntime:
    return create_agent_runtime(
        agent=agent,
        storage=InMemoryStorage(),
        scope_key=scope_of,
        capabilities=capabilities,  # type: ignore[arg-type]  # wrong values on purpose
    )


def test_every_kind_of_problem_is_reported_in_one_error() -> None:
    agent = needs(alpha, beta, gamma, delta)
    wrong_facade = define_capability(OtherFacade, id="gamma")
    capabilities: dict[str, object] = {
        # alpha: missing
        "beta": RecordingBinding(alpha).binding,  # a binding made for another id
        "gamma": create_capability_binding(
            capability=wrong_facade, acquire=lambda _: OtherFacade()
        ),
        "delta": object(),  # not a binding at all
        "extra": RecordingBinding(extra).binding,  # no operation declares it
    }

    with pytest.raises(CapabilityBindingError) as caught:
        build(agent, capabilities)

    assert caught.value.ids == ("alpha", "beta", "delta", "extra", "gamma")
    message = str(caught.value)
    for cap_id in caught.value.ids:
        assert repr(cap_id) in message


def test_a_missing_binding_names_the_id_the_declaring_operation_and_the_fix() -> None:
    with pytest.raises(CapabilityBindingError) as caught:
        build(needs(alpha), {})

    assert caught.value.ids == ("alpha",)
    message = str(caught.value)
    assert "'alpha' is not bound" in message
    assert "tool 'use'" in message
    assert "capabilities={'alpha': <binding>}" in message


def test_an_extra_binding_names_the_id_and_says_to_remove_it() -> None:
    with pytest.raises(CapabilityBindingError) as caught:
        build(needs(alpha), record(RecordingBinding(alpha), RecordingBinding(extra)))

    assert caught.value.ids == ("extra",)
    assert "'extra'" in str(caught.value)
    assert "remove it from capabilities=" in str(caught.value)


def test_a_binding_made_for_another_capability_names_both_ids() -> None:
    with pytest.raises(CapabilityBindingError) as caught:
        build(needs(alpha), {"alpha": RecordingBinding(beta).binding})

    assert caught.value.ids == ("alpha",)
    message = str(caught.value)
    assert "'beta'" in message
    assert "bind a binding made for 'alpha'" in message


def test_a_binding_with_the_wrong_facade_names_both_facades_and_the_fix() -> None:
    wrong = define_capability(OtherFacade, id="alpha")
    binding = create_capability_binding(capability=wrong, acquire=lambda _: OtherFacade())

    with pytest.raises(CapabilityBindingError) as caught:
        build(needs(alpha), {"alpha": binding})

    assert caught.value.ids == ("alpha",)
    message = str(caught.value)
    assert "OtherFacade" in message
    assert "helpers.Box" in message
    assert "bind" in message.split("helpers.Box", 1)[1]  # says what to bind instead


def test_a_value_that_is_not_a_binding_names_the_id_and_the_factory_to_use() -> None:
    with pytest.raises(CapabilityBindingError) as caught:
        build(needs(alpha), {"alpha": lambda _: Box()})

    assert caught.value.ids == ("alpha",)
    assert "not a capability binding" in str(caught.value)
    assert "create_capability_binding()" in str(caught.value)


def test_the_error_is_a_value_error_so_generic_handlers_catch_it() -> None:
    with pytest.raises(ValueError, match="alpha"):
        build(needs(alpha), {})


def test_a_correct_record_builds_a_runtime_binding_exactly_the_declared_ids() -> None:
    a, b = RecordingBinding(alpha), RecordingBinding(beta)

    runtime = build(needs(alpha, beta), record(a, b))

    assert runtime.bindings == {"alpha": a.binding, "beta": b.binding}


def test_a_binding_for_a_facade_subtype_is_accepted() -> None:
    special = define_capability(SpecialBox, id="alpha")
    binding = create_capability_binding(capability=special, acquire=lambda _: SpecialBox())

    runtime = build(needs(alpha), {"alpha": binding})

    assert runtime.bindings["alpha"] is binding


def test_tools_and_commands_declaring_one_id_share_one_record_entry() -> None:
    agent = build_agent(tools={"use": use_tool(alpha)}, commands={"reset": use_command(alpha)})
    a = RecordingBinding(alpha)

    runtime = build(agent, record(a))

    assert list(runtime.bindings) == ["alpha"]


def test_subagent_requirements_must_be_bound_by_the_delegating_runtime() -> None:
    child = build_agent(name="child", tools={"use": use_tool(alpha)})
    parent = build_agent(name="parent", subagents={"child": child})

    with pytest.raises(CapabilityBindingError) as caught:
        build(parent, {})

    assert caught.value.ids == ("alpha",)
    assert "subagent 'child'" in str(caught.value)


@pytest.mark.parametrize("capabilities", [None, {}], ids=["omitted", "empty"])
def test_an_agent_without_capabilities_needs_no_record(
    capabilities: dict[str, object] | None,
) -> None:
    runtime = build(build_agent(), capabilities)

    assert runtime.bindings == {}


def test_an_agent_without_capabilities_rejects_any_binding() -> None:
    with pytest.raises(CapabilityBindingError) as caught:
        build(build_agent(), record(RecordingBinding(alpha)))

    assert caught.value.ids == ("alpha",)


def test_create_pai_reports_the_problems_of_every_agent_in_one_error() -> None:
    with pytest.raises(CapabilityBindingError) as caught:
        create_pai(
            agents={
                "writer": {"agent": needs(alpha), "capabilities": {}},
                "reader": {
                    "agent": needs(beta),
                    "capabilities": record(RecordingBinding(beta), RecordingBinding(gamma)),
                },
                "fine": {"agent": needs(delta), "capabilities": record(RecordingBinding(delta))},
            },
            scope_key=scope_of,
            storage=InMemoryStorage(),
        )

    assert caught.value.ids == ("alpha", "gamma")
    message = str(caught.value)
    assert "agent 'writer'" in message
    assert "agent 'reader'" in message
    assert "'fine'" not in message
