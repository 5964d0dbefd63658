"""Mesh services and Redis as real processes on loopback, for the reliability suite.

A ``ServiceProcess`` is one ``python -m <module>`` with fixed ports, so it can
be killed (SIGKILL), stopped (SIGTERM) and started again on the same address,
which is what the chaos cases do to it. Its output goes to a log file (a pipe
nobody reads would block it once full), and the suite reads its memory, file
descriptors and Prometheus metrics from outside, as an operator would.
``RedisProcess`` is a dedicated ``redis-server`` with AOF on (fsync always), so
a restart keeps every acknowledged write and no other test's data is touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from meshkit.up import free_port
from services.runtime.health import wait_serving

ROOT = Path(__file__).resolve().parents[2]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without AGENTMESH_* settings (a developer's would leak into the services)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMESH_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


#: How many times a first start is tried again on fresh ports when its port was taken meanwhile.
PORT_RETRIES = 2
#: What a service's log says when its port was taken (``OSError`` errno 98).
_PORT_TAKEN = "Address already in use"
#: The line ``spawn`` writes to the log before each start.
_START = "--- start"


@dataclass
class ServiceProcess:
    """One mesh service as a process on fixed ports (see module docstring)."""

    name: str
    module: str
    args: list[str]
    folder: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    process: asyncio.subprocess.Process | None = None
    starts: int = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} is not running"
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    @property
    def log_path(self) -> Path:
        return self.folder / f"{self.name}.log"

    def argv(self) -> list[str]:
        ports = ["--port", str(self.port), "--metrics-port", str(self.metrics_port)]
        return [sys.executable, "-m", self.module, *ports, *self.args]

    async def spawn(self) -> None:
        """Start the process without waiting for it (see ``start``)."""
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"{_START} {self.starts}: {' '.join(self.argv())}\n".encode())
            self.process = await asyncio.create_subprocess_exec(
                *self.argv(), cwd=ROOT, env=self.env, stdout=log, stderr=asyncio.subprocess.STDOUT
            )

    async def start(self, within_s: float = 60.0) -> None:
        """Start the process and return once its health says SERVING.

        A first start whose port was taken between ``free_port`` and the bind (another process's outgoing
        connection got it: "Address already in use") starts again on fresh ports, up to ``PORT_RETRIES`` times;
        a restart keeps its address, which is what the chaos cases test.
        """
        first = self.starts == 0
        for attempt in range(PORT_RETRIES + 1):
            await self.spawn()
            try:
                await wait_serving(self.address, within_s=within_s, still_starting=lambda: self.running)
                return
            except (RuntimeError, TimeoutError) as exc:
                # This start's own lines only: the log holds every start (``spawn``).
                taken = not self.running and _PORT_TAKEN in self.log_tail().rsplit(_START, 1)[-1]
                if not (first and taken and attempt < PORT_RETRIES):
                    raise AssertionError(f"{self.name} did not start: {exc}\n{self.log_tail()}") from None
                self.port, self.metrics_port = free_port(), free_port()

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to drain or say goodbye."""
        self.signal(signal.SIGKILL)

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(sig)

    async def wait_exit(self, within_s: float = 30.0) -> int:
        assert self.process is not None
        return await asyncio.wait_for(self.process.wait(), within_s)

    async def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM and wait for the drain; SIGKILL if it overruns."""
        if not self.running:
            return
        self.signal(signal.SIGTERM)
        try:
            await self.wait_exit(grace_s)
        except TimeoutError:
            self.kill()
            await self.wait_exit()

    def rss_bytes(self) -> int:
        """Resident memory, from /proc."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no VmRSS for {self.name}")

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/task"))

    async def metric(self, name: str, default: float | None = None, **labels: str) -> float:
        """The sum of the samples of ``name`` (with these labels) on the process's /metrics.

        ``default``: the value when no such sample exists yet (a labelled metric appears on first use).
        """
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())
        total, found = 0.0, False
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
                    found = True
        if not found and default is not None:
            return default
        if not found:
            raise AssertionError(f"{self.name} exposes no {name}{labels or ''}")
        return total

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class RedisProcess:
    """A dedicated redis-server with AOF (appendfsync always) in ``folder``."""

    folder: Path
    port: int = field(default_factory=free_port)
    process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self, within_s: float = 20.0) -> None:
        argv = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.folder),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--protected-mode",
            "no",
        ]
        with (self.folder / "redis.log").open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(*argv, stdout=log, stderr=asyncio.subprocess.STDOUT)
        client = aioredis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + within_s
        try:
            while True:
                try:
                    if await client.ping():
                        return
                except Exception as exc:  # refused while it starts (redis-py wraps OSError in its own errors)
                    if time.monotonic() > deadline:
                        raise AssertionError(f"redis-server on {self.port} did not answer: {exc}") from None
                assert self.process.returncode is None, (self.folder / "redis.log").read_text()
                await asyncio.sleep(0.05)
        finally:
            await client.aclose()

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        self.process.send_signal(sig)
        await asyncio.wait_for(self.process.wait(), 20)

    def client(self) -> aioredis.Redis:
        return aioredis.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=2)


async def eventually_async(
    check: Callable[[], Awaitable[bool]], within_s: float = 10.0, what: str = "condition"
) -> None:
    """Return once ``await check()`` holds (a scraped metric, a call); fail after ``within_s``."""
    deadline = time.monotonic() + within_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {within_s} s")
        await asyncio.sleep(0.05)


async def busy_one(services: list[ServiceProcess], metric: str, **labels: str) -> ServiceProcess:
    """The one running service whose ``metric`` is above zero: the one carrying the work now."""
    found: list[ServiceProcess] = []

    async def one() -> bool:
        found[:] = [s for s in services if s.running and await s.metric(metric, 0.0, **labels) > 0]
        return len(found) == 1

    await eventually_async(one, what=f"exactly one of {[s.name for s in services]} with {metric} > 0")
    return found[0]
