"""Config loading: flags over env over defaults, and one-line errors."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from services.router.config import RouterConfig
from services.runtime.config import ConfigError, RedisConfig, ServiceConfig, load_config, opt, positive


@dataclass(frozen=True)
class DemoConfig(RedisConfig):
    """Demo service."""

    ENV_PREFIX = "AGENTMESH_DEMO_"
    SERVICE_NAME = "demo"

    replicas: tuple[str, ...] = opt((), "inference replicas")
    ratio: float = opt(0.5, "a ratio", check=positive)
    name: str | None = opt(None, "optional name")


def test_defaults() -> None:
    config = load_config(DemoConfig, [], {})
    assert config.port == 0 and config.host == "127.0.0.1" and config.redis_required is True
    assert config.replicas == () and config.name is None


def test_flag_beats_service_env_beats_shared_env() -> None:
    env = {"AGENTMESH_DEMO_PORT": "7001", "AGENTMESH_PORT": "7002", "AGENTMESH_LOG_LEVEL": "debug"}
    assert load_config(DemoConfig, ["--port", "7000"], env).port == 7000
    assert load_config(DemoConfig, [], env).port == 7001
    assert load_config(DemoConfig, [], {"AGENTMESH_PORT": "7002"}).port == 7002
    assert load_config(DemoConfig, [], env).log_level == "debug"


def test_types_are_converted() -> None:
    config = load_config(
        DemoConfig,
        ["--replicas", "a:1, b:2", "--ratio", "0.25", "--redis-required", "false", "--name", "x"],
        {},
    )
    assert config.replicas == ("a:1", "b:2") and config.ratio == 0.25
    assert config.redis_required is False and config.name == "x"


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--port", "70000"], {}, "--port: 70000 is not a valid port (0-65535)"),
        (["--port", "abc"], {}, "--port: 'abc' is not a valid <class 'int'>"),
        ([], {"AGENTMESH_DEMO_PORT": "-1"}, "AGENTMESH_DEMO_PORT: -1 is not a valid port (0-65535)"),
        (["--bogus", "1"], {}, "unrecognized arguments: --bogus 1"),
        (["--log-level", "loud"], {}, "--log-level: 'loud' is not one of debug, info, warning, error"),
        (["--ratio", "0"], {}, "--ratio: 0.0 must be greater than 0"),
        (["--redis-required", "maybe"], {}, "--redis-required: 'maybe' is not a boolean (true/false)"),
        (["--redis-url", "http://x"], {}, "--redis-url: 'http://x' is not a redis:// URL"),
    ],
)
def test_errors_are_one_line_naming_the_source(argv: list[str], env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(DemoConfig, argv, env)
    assert str(err.value) == message
    assert "\n" not in str(err.value)


def test_config_is_frozen() -> None:
    config = load_config(ServiceConfig, [], {})
    with pytest.raises(AttributeError):
        config.port = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tool-selection", "magic"], "--tool-selection: 'magic' is not one of embedding, llm"),
        (
            ["--selector-choose", "0.2", "--selector-reject", "0.4"],
            "--selector-reject and --selector-choose: need reject <= choose <= 1",
        ),
        (
            ["--selector-margin", "0.1", "--selector-overrule", "0.05"],
            "--selector-overrule: must be at least --selector-margin",
        ),
        (
            ["--judges", "similarity,magic"],
            "--judges: unknown judge 'magic'; known: similarity, schema, classifier, whether, likelihood, llm",
        ),
        (["--judges", "llm,similarity"], "--judges: llm decides whatever is left, so it must come last"),
        (["--selector-whether-floor", "1"], "--selector-whether-floor: must be at least 0 (0: off) and below 1"),
        (
            ["--judges", "classifier,llm"],
            "--judges: classifier judges the similarity judge's band, so similarity must run",
        ),
    ],
)
def test_router_tool_selection_settings_are_checked(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(RouterConfig, argv, {})
    assert str(err.value) == message
    assert load_config(RouterConfig, ["--tool-selection", "llm"], {}).tool_selection == "llm"


def test_the_judge_chain_comes_from_config_and_the_mode_is_a_chain() -> None:
    assert load_config(RouterConfig, [], {}).planning().judges == (
        "similarity",
        "schema",
        "classifier",
        "whether",
        "likelihood",
        "llm",
    )
    assert load_config(RouterConfig, ["--tool-selection", "llm"], {}).planning().judges == ("llm",)
    custom = load_config(RouterConfig, ["--judges", "similarity,classifier"], {}).planning()
    assert custom.judges == ("similarity", "classifier") and custom.embeds
    env = load_config(RouterConfig, [], {"AGENTMESH_ROUTER_JUDGES": "similarity,llm"}).planning()
    assert env.judges == ("similarity", "llm")
