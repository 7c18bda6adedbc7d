"""Models as plugins, chosen in code by name or in configuration: the ``pai_models`` hook,
``define_agent(model="provider:name")``, ``[model]`` and its errors.

The model provider here (``acme``) is registered in code through the real plugin manager; its
model answers with its own name and options, so a test sees which model a run used.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from config_helpers import NO_ENV, write
from pydantic import BaseModel, ConfigDict

from pai.core import (
    AssistantMessage,
    ConfigError,
    DefinitionError,
    DuplicateRegistrationError,
    InMemoryStorage,
    Model,
    ModelConfigurationError,
    ModelRequest,
    PaiConfig,
    create_agent_runtime,
    define_agent,
    load_config,
    model_from_config,
    resolve_model,
)
from pai.core._model_config import check_model_config
from pai.core.ext import ModelRegistration, Plugins, hookimpl


class AcmeOptions(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    region: str = "eu"
    temperature: float = 0.0


class AcmeModel:
    def __init__(self, name: str, options: AcmeOptions) -> None:
        self.name = name
        self.options = options

    async def request(self, request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(content=f"{self.name}@{self.options.region}")


def build_acme(name: str, options: AcmeOptions) -> Model:
    if name == "needs-key":
        raise ModelConfigurationError("no API key: set ACME_API_KEY")
    return AcmeModel(name, options)


ACME = ModelRegistration(
    name="acme",
    factory=build_acme,
    options=AcmeOptions,
    description="Acme's models.",
    install_hint="pip install pai-model-acme",
)


class AcmePlugin:
    def __init__(self, *registrations: ModelRegistration) -> None:
        self.registrations = list(registrations)

    @hookimpl
    def pai_models(self) -> list[ModelRegistration]:
        return self.registrations


def acme_plugins(*registrations: ModelRegistration) -> Plugins:
    plugins = Plugins()
    plugins.register(
        AcmePlugin(*(registrations or (ACME,))), name="acme", distribution="pai-model-acme"
    )
    return plugins


def scope_of(identity: object) -> str:
    return "s"


def config_in(tmp_path: Path, toml: str, environ: dict[str, str] | None = None) -> PaiConfig:
    write(tmp_path / "pai.toml", toml)
    return load_config(tmp_path, environ=NO_ENV if environ is None else environ)


async def answer(
    agent_model: Model | str | None = None,
    *,
    plugins: Plugins | None = None,
    config: PaiConfig | None = None,
) -> str | None:
    agent = define_agent(name="main", model=agent_model)
    async with create_agent_runtime(
        agent=agent, scope_key=scope_of, storage=InMemoryStorage(), plugins=plugins, config=config
    ) as built:
        thread = await built.admin(identity=None).create_thread()
        return (await thread.send("hi")).text


# -- the hook ----------------------------------------------------------------------------------


def test_plugins_models_returns_each_registration_stamped_with_its_distribution() -> None:
    models = acme_plugins().models()

    assert list(models) == ["acme"]
    assert models["acme"].distribution == "pai-model-acme"


def test_two_distributions_registering_one_provider_name_is_an_error_naming_both() -> None:
    plugins = acme_plugins()
    plugins.register(AcmePlugin(ACME), name="other", distribution="pai-model-other")

    with pytest.raises(DuplicateRegistrationError, match="pai-model-acme") as caught:
        plugins.models()
    assert "pai-model-other" in str(caught.value)
    assert "'acme'" in str(caught.value)


# -- a model named in code ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_model_name_in_define_agent_is_resolved_through_the_plugins() -> None:
    assert await answer("acme:small", plugins=acme_plugins()) == "small@eu"


@pytest.mark.anyio
async def test_a_model_name_takes_its_options_from_the_providers_table(tmp_path: Path) -> None:
    config = config_in(tmp_path, '[model.acme]\nregion = "us"\n')

    assert await answer("acme:small", plugins=acme_plugins(), config=config) == "small@us"


@pytest.mark.anyio
async def test_a_subagent_named_model_is_resolved_too() -> None:
    from pai.core.testing import ScriptedModel, tool_call
    from pai.core.testing import text as say

    helper = define_agent(name="helper", model="acme:tiny")
    agent = define_agent(
        name="main",
        model=ScriptedModel([tool_call("helper", {"task": "go"}), say("done")]),
        subagents={"helper": helper},
    )
    async with create_agent_runtime(
        agent=agent, scope_key=scope_of, storage=InMemoryStorage(), plugins=acme_plugins()
    ) as built:
        thread = await built.admin(identity=None).create_thread()
        await thread.send("hi")
        (child,) = await thread.children()
        messages = await built.admin(identity=None).thread(child.id).messages()

    assert messages[-1] == AssistantMessage(content="tiny@eu")


def test_a_model_name_without_a_provider_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError, match=r"'gpt-4.1' is not '<provider>:<model name>'"):
        define_agent(name="main", model="gpt-4.1")


def test_resolving_an_unknown_provider_suggests_the_close_installed_one() -> None:
    with pytest.raises(ModelConfigurationError, match="did you mean 'acme'") as caught:
        resolve_model("acmee:small", plugins=acme_plugins())
    assert "installed providers: acme (pai-model-acme)" in str(caught.value)
    assert "pip install" not in str(caught.value)


def test_a_known_provider_that_is_not_installed_says_what_to_install() -> None:
    with pytest.raises(ModelConfigurationError, match="pip install pai-model-openai"):
        resolve_model("openai:gpt-4.1-mini", plugins=Plugins())


def test_a_provider_that_cannot_build_its_model_names_the_model_and_the_fix() -> None:
    with pytest.raises(ModelConfigurationError, match="set ACME_API_KEY") as caught:
        resolve_model("acme:needs-key", plugins=acme_plugins())
    assert "acme:needs-key" in str(caught.value)


# -- [model] in the configuration --------------------------------------------------------------


@pytest.mark.anyio
async def test_the_configured_model_is_used_when_the_agent_has_none(tmp_path: Path) -> None:
    config = config_in(tmp_path, '[model]\nprovider = "acme"\nname = "big"\n')

    assert await answer(plugins=acme_plugins(), config=config) == "big@eu"


@pytest.mark.anyio
async def test_a_model_object_in_code_wins_over_the_configured_one(tmp_path: Path) -> None:
    config = config_in(tmp_path, '[model]\nprovider = "acme"\nname = "big"\n')

    assert (
        await answer(AcmeModel("mine", AcmeOptions()), plugins=acme_plugins(), config=config)
        == "mine@eu"
    )


def test_an_environment_variable_overrides_the_configured_model_name(tmp_path: Path) -> None:
    config = config_in(
        tmp_path,
        '[model]\nprovider = "acme"\nname = "big"\n',
        {"PAI_MODEL__NAME": "small", "PAI_MODEL__ACME__REGION": "ap"},
    )

    model = model_from_config(config, plugins=acme_plugins())

    assert isinstance(model, AcmeModel)
    assert (model.name, model.options.region) == ("small", "ap")


def test_no_model_table_configures_no_model(tmp_path: Path) -> None:
    config = config_in(tmp_path, '[storage]\nurl = "memory://"\n')

    assert model_from_config(config, plugins=acme_plugins()) is None


def test_a_model_table_with_only_provider_options_configures_no_model(tmp_path: Path) -> None:
    config = config_in(tmp_path, '[model.acme]\nregion = "us"\n')

    assert model_from_config(config, plugins=acme_plugins()) is None


def test_an_unknown_option_names_the_file_the_key_and_the_close_one(tmp_path: Path) -> None:
    config = config_in(
        tmp_path, '[model]\nprovider = "acme"\nname = "big"\n[model.acme]\nregon = "us"\n'
    )

    with pytest.raises(ConfigError, match=r"model\.acme\.regon = 'us'") as caught:
        model_from_config(config, plugins=acme_plugins())
    message = str(caught.value)
    assert str(tmp_path / "pai.toml") in message
    assert "did you mean 'region'?" in message
    assert "Valid keys of [model.acme]: region, temperature" in message


def test_an_unknown_provider_in_the_file_names_the_file_and_suggests(tmp_path: Path) -> None:
    config = config_in(tmp_path, '[model]\nprovider = "acm"\nname = "big"\n')

    with pytest.raises(ConfigError, match="did you mean 'acme'") as caught:
        model_from_config(config, plugins=acme_plugins())
    assert f"provider = 'acm' ({tmp_path / 'pai.toml'})" in str(caught.value)


def test_a_provider_without_a_name_shows_the_table_to_write(tmp_path: Path) -> None:
    config = config_in(tmp_path, '[model]\nprovider = "acme"\n')

    with pytest.raises(ConfigError, match="has no name") as caught:
        model_from_config(config, plugins=acme_plugins())
    assert 'name = "gpt-4.1-mini"' in str(caught.value)
    assert "PAI_MODEL__NAME" in str(caught.value)


def test_an_unknown_key_in_the_model_table_suggests_the_close_one(tmp_path: Path) -> None:
    config = config_in(tmp_path, '[model]\nprovider = "acme"\nnmae = "big"\n')

    with pytest.raises(ConfigError, match=r"unknown key model\.nmae .*did you mean 'name'"):
        model_from_config(config, plugins=acme_plugins())


def test_a_model_that_cannot_be_built_from_the_file_names_the_file(tmp_path: Path) -> None:
    config = config_in(tmp_path, '[model]\nprovider = "acme"\nname = "needs-key"\n')

    with pytest.raises(ConfigError, match="set ACME_API_KEY") as caught:
        model_from_config(config, plugins=acme_plugins())
    assert str(tmp_path / "pai.toml") in str(caught.value)


def test_checking_validates_every_installed_providers_options(tmp_path: Path) -> None:
    config = config_in(tmp_path, '[model.acme]\ntemperature = "hot"\n')

    with pytest.raises(ConfigError, match=r"model\.acme\.temperature = 'hot'"):
        check_model_config(config, plugins=acme_plugins())


def test_a_misspelt_model_table_is_an_error_naming_the_tables(tmp_path: Path) -> None:
    write(tmp_path / "pai.toml", '[modle]\nprovider = "acme"\n')

    with pytest.raises(ConfigError, match=r"did you mean 'model'\?"):
        load_config(tmp_path, environ=NO_ENV)


# -- secrets in [model.<provider>] ----------------------------------------------------------------

SECRET = "acme-Zq81xTfA0b9Kc2LmQ77vWbN4"


@pytest.mark.parametrize("key", ["api_key", "token", "password", "client_secret"])
def test_a_secret_key_a_provider_does_not_take_is_refused_without_its_value(
    tmp_path: Path, key: str
) -> None:
    config = config_in(tmp_path, f'[model.acme]\n{key} = "{SECRET}"\n')

    with pytest.raises(ConfigError) as caught:
        check_model_config(config, plugins=acme_plugins())

    message = str(caught.value)
    assert message.startswith(f"model.acme.{key} ({tmp_path / 'pai.toml'})")
    assert "secrets never go in configuration files" in message
    assert "reads its key from the environment" in message  # acme has no *_env option
    assert SECRET not in message


def test_a_wrong_value_of_a_provider_option_named_like_a_secret_is_masked(
    tmp_path: Path,
) -> None:
    class Tokened(BaseModel):
        model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid")
        auth_token: int = 0

    registration = ModelRegistration(
        name="acme", factory=build_acme, options=Tokened, description="", install_hint=""
    )
    config = config_in(
        tmp_path, f'[model]\nprovider = "acme"\nname = "m"\n[model.acme]\nauth_token = "{SECRET}"\n'
    )

    with pytest.raises(ConfigError) as caught:
        check_model_config(config, plugins=acme_plugins(registration))

    assert "model.acme.auth_token = '***'" in str(caught.value)
    assert SECRET not in str(caught.value)
