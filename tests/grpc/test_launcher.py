"""Process entry points: one clear line and a non-zero exit on bad config or failed start-up."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_probe(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.support.probe_service", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "AGENTMESH_PROBE_REDIS_REQUIRED": "false"},
    )


@pytest.mark.parametrize(
    ("args", "line", "code"),
    [
        (["--port", "99999"], "probe: error: --port: 99999 is not a valid port (0-65535)", 2),
        (["--frobnicate"], "probe: error: unrecognized arguments: --frobnicate", 2),
        (
            ["--drain-grace-s", "soon"],
            "probe: error: --drain-grace-s: 'soon' is not a valid <class 'float'>",
            2,
        ),
    ],
)
def test_config_errors_print_one_line(args: list[str], line: str, code: int) -> None:
    result = run_probe(*args)
    assert result.returncode == code
    assert result.stderr.strip() == line
    assert "Traceback" not in result.stderr


def test_unreachable_redis_when_required_is_one_line() -> None:
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    result = run_probe("--redis-required", "true", "--redis-url", f"redis://127.0.0.1:{free}/0")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"probe: error: Redis at redis://127.0.0.1:{free}/0 is unreachable")


def test_port_in_use_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        result = run_probe("--port", str(taken))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"probe: error: cannot listen on 127.0.0.1:{taken}")


def test_sigterm_drains_and_exits_zero() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.probe_service", "--port", "0", "--redis-required", "false"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:")
        proc.send_signal(signal.SIGTERM)
        start = time.monotonic()
        assert proc.wait(timeout=20) == 0
        assert time.monotonic() - start < 15
        assert proc.stderr is not None
        assert "draining" in proc.stderr.read()
    finally:
        proc.kill()
