"""Checking a runtime's binding record against what its agent requires."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from pai.core._agent import Requirement
from pai.core._binding import CapabilityBinding
from pai.core._capability import facade_name, same_facade
from pai.core._errors import CapabilityBindingError, ConfigError


def validate_binding_record(
    requirements: Mapping[str, Requirement],
    capabilities: Mapping[str, object],
    *,
    unbound: Mapping[str, str] | None = None,
    cause: BaseException | None = None,
) -> dict[str, CapabilityBinding[object]]:
    """Check a binding record against an agent's requirements; report every problem at once.

    ``unbound`` explains, per id, why configuration could not bind a capability the record
    lacks (see :func:`~pai.core.bindings_from_config`); it replaces the plain "not bound" line,
    and makes the error a :class:`~pai.core.ConfigError`, chained from ``cause``.
    """
    unbound = unbound or {}
    problems: list[tuple[str, str]] = []
    from_config = False
    for cap_id in requirements.keys() - capabilities.keys():
        explained = unbound.get(cap_id)
        if explained is not None:
            from_config = True
            problems.append((cap_id, explained))
            continue
        declared = ", ".join(requirements[cap_id].declared_by)
        problems.append(
            (
                cap_id,
                f"{cap_id!r} is not bound (declared by {declared}); add capabilities="
                f"{{{cap_id!r}: <binding>}}",
            )
        )
    bindings: dict[str, CapabilityBinding[object]] = {}
    for cap_id, value in capabilities.items():
        requirement = requirements.get(cap_id)
        binding = cast("CapabilityBinding[object]", value)
        if requirement is None:
            problems.append(
                (
                    cap_id,
                    f"{cap_id!r} is bound but no tool or command of the agent declares it; "
                    "remove it from capabilities=",
                )
            )
        elif not isinstance(value, CapabilityBinding):
            problems.append(
                (
                    cap_id,
                    f"{cap_id!r} is bound to {value!r}, which is not a capability binding; "
                    "use create_capability_binding() or a capability package's factory",
                )
            )
        elif binding.capability.id != cap_id:
            problems.append(
                (
                    cap_id,
                    f"{cap_id!r} is bound to a binding for capability "
                    f"{binding.capability.id!r}; bind a binding made for {cap_id!r}",
                )
            )
        elif not same_facade(requirement.capability.facade, binding.capability.facade):
            problems.append(
                (
                    cap_id,
                    f"{cap_id!r} is bound to a binding whose facade is "
                    f"{facade_name(binding.capability.facade)}, but the agent's operations need "
                    f"{facade_name(requirement.capability.facade)}; bind a binding made with "
                    f"the token the operations declare (or one whose facade is a subclass of "
                    f"{facade_name(requirement.capability.facade)})",
                )
            )
        else:
            bindings[cap_id] = binding
    if problems:
        problems.sort()
        lines = "\n".join("  - " + text.replace("\n", "\n    ") for _, text in problems)
        error_type = ConfigError if from_config else CapabilityBindingError
        raise error_type(
            f"the capability bindings do not match what the agent needs:\n{lines}",
            ids=sorted({cap_id for cap_id, _ in problems}),
        ) from (cause if from_config else None)
    return bindings
