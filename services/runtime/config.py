"""Typed, validated service configuration from CLI flags and environment variables.

Each service declares one frozen dataclass deriving from ``ServiceConfig``;
``load_config`` builds its parser from the fields. Every field ``foo_bar`` is
settable as ``--foo-bar`` or as ``<ENV_PREFIX>FOO_BAR`` (then the shared
``AGENTMESH_FOO_BAR``); the flag wins over the environment, the environment
over the default. Errors (an unknown flag, a bad port, a bad choice) raise
``ConfigError`` with one line that names the flag or variable at fault;
``launch.run_service`` prints it and exits 2 — never a traceback.

Field metadata (``opt(...)``): ``help``, ``check`` (a validator raising
ValueError with the reason) and ``choices``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NoReturn, TypeVar

from services.runtime.options import DEFAULT_MAX_MESSAGE_BYTES

C = TypeVar("C", bound="ServiceConfig")


class ConfigError(Exception):
    """A configuration value is missing, malformed or out of range (one line)."""


def opt(
    default: Any,
    help: str,
    *,
    check: Callable[[Any], None] | None = None,
    choices: Sequence[str] | None = None,
) -> Any:
    """A config field with help text and optional validation."""
    return dataclasses.field(default=default, metadata={"help": help, "check": check, "choices": choices})


def port(value: int) -> None:
    if not 0 <= value <= 65535:
        raise ValueError(f"{value} is not a valid port (0-65535)")


def metrics_port(value: int) -> None:
    if not -1 <= value <= 65535:
        raise ValueError(f"{value} is not a valid port (0-65535, or -1 to disable)")


def positive(value: float) -> None:
    if value <= 0:
        raise ValueError(f"{value} must be greater than 0")


def non_negative(value: float) -> None:
    if value < 0:
        raise ValueError(f"{value} must not be negative")


def fraction(value: float) -> None:
    if not 0 < value <= 1:
        raise ValueError(f"{value} must be in (0, 1]")


def port_or_off(value: int) -> None:
    if not -1 <= value <= 65535:
        raise ValueError(f"{value} is not a valid port (0-65535, or -1 for none)")


def share(value: float) -> None:
    if not 0 <= value <= 1:
        raise ValueError(f"{value} must be in [0, 1]")


def redis_url(value: str) -> None:
    if value and not value.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"{value!r} is not a redis:// URL")


@dataclass(frozen=True)
class ServiceConfig:
    """Settings every AgentMesh server has."""

    #: Prefix of this service's environment variables, e.g. "AGENTMESH_INFERENCE_".
    ENV_PREFIX: ClassVar[str] = "AGENTMESH_"
    #: Name in logs, traces and metrics.
    SERVICE_NAME: ClassVar[str] = "agentmesh"

    host: str = opt("127.0.0.1", "address to listen on")
    port: int = opt(0, "gRPC port (0 picks a free one)", check=port)
    metrics_port: int = opt(-1, "Prometheus /metrics port (0 picks a free one, -1 disables)", check=metrics_port)
    drain_grace_s: float = opt(10.0, "seconds in-flight RPCs get to finish on SIGTERM", check=non_negative)
    max_concurrent_rpcs: int = opt(1000, "RPCs served at once before new ones get RESOURCE_EXHAUSTED", check=positive)
    max_message_bytes: int = opt(DEFAULT_MAX_MESSAGE_BYTES, "largest message sent or received", check=positive)
    log_level: str = opt("info", "log level", choices=("debug", "info", "warning", "error"))
    otel_exporter: str = opt("none", "trace exporter", choices=("none", "otlp", "console"))
    otel_endpoint: str = opt("http://127.0.0.1:4317", "OTLP collector endpoint (gRPC)")
    trace_sample_ratio: float = opt(1.0, "share of traces sampled (baggage agentmesh.sample=1 forces one)", check=share)
    trace_tenants: tuple[str, ...] = opt((), "tenants whose traces are always sampled, comma-separated")
    tls_cert: str = opt("", "PEM certificate chain of this mesh member (with --tls-key, --tls-ca: mutual TLS)")
    tls_key: str = opt("", "PEM private key of --tls-cert")
    tls_ca: str = opt("", "PEM CA bundle that signs every mesh member")
    tls_server_name: str = opt("", "name checked in peers' certificates (default: the host dialled)")
    health_port: int = opt(-1, "plaintext grpc.health.v1-only port for probes under mTLS (-1: none)", check=port_or_off)

    def __post_init__(self) -> None:
        tls = {"--tls-cert": self.tls_cert, "--tls-key": self.tls_key, "--tls-ca": self.tls_ca}
        given = [flag for flag, path in tls.items() if path]
        if given and len(given) < len(tls):
            raise ConfigError(f"{', '.join(sorted(set(tls) - set(given)))}: mutual TLS needs all of {', '.join(tls)}")
        for flag, path in tls.items():
            if path and not Path(path).is_file():
                raise ConfigError(f"{flag}: {path} does not exist")

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class RedisConfig(ServiceConfig):
    """Settings of a server that keeps state in Redis."""

    redis_url: str = opt("redis://127.0.0.1:6379/0", "Redis URL", check=redis_url)
    redis_required: bool = opt(True, "refuse to start when Redis does not answer")


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{text!r} is not a boolean (true/false)")


def _converter(tp: Any) -> Callable[[str], Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = _converter(args[0])
        return lambda s: None if s == "" else inner(s)
    if origin is tuple:
        inner = _converter(typing.get_args(tp)[0])
        return lambda s: tuple(inner(p.strip()) for p in s.split(",") if p.strip())
    if tp is bool:
        return _bool
    if tp in (int, float, str, Path):
        return typing.cast(Callable[[str], Any], tp)
    raise TypeError(f"unsupported config field type {tp!r}")


def load_config(cls: type[C], argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> C:
    """Build ``cls`` from flags (``argv``) and the environment (``env``); validate every field."""
    env = os.environ if env is None else env
    hints = typing.get_type_hints(cls)
    parser = _Parser(prog=cls.SERVICE_NAME, description=(cls.__doc__ or "").strip().splitlines()[0])
    fields = [f for f in dataclasses.fields(cls) if f.init]
    for f in fields:
        flag = "--" + f.name.replace("_", "-")
        parser.add_argument(flag, dest=f.name, default=None, help=f.metadata.get("help"), metavar="VALUE")
    args = parser.parse_args(list(argv) if argv is not None else None)
    values: dict[str, Any] = {}
    for f in fields:
        flag = "--" + f.name.replace("_", "-")
        raw: str | None = getattr(args, f.name)
        source = flag
        if raw is None:
            for var in (f"{cls.ENV_PREFIX}{f.name.upper()}", f"AGENTMESH_{f.name.upper()}"):
                if var in env:
                    raw, source = env[var], var
                    break
        if raw is None:
            value = f.default
        else:
            try:
                value = _converter(hints[f.name])(raw)
            except ValueError as exc:
                reason = str(exc) if "is not" in str(exc) else f"{raw!r} is not a valid {hints[f.name]}"
                raise ConfigError(f"{source}: {reason}") from None
        choices = f.metadata.get("choices")
        if choices and value not in choices:
            raise ConfigError(f"{source}: {value!r} is not one of {', '.join(choices)}")
        check = f.metadata.get("check")
        if check is not None:
            try:
                check(value)
            except ValueError as exc:
                raise ConfigError(f"{source}: {exc}") from None
        values[f.name] = value
    config = cls(**values)
    config_check = getattr(config, "validate", None)
    if callable(config_check):
        config_check()
    return config
