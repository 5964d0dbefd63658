"""Make sure a Redis server answers on the configured URL; start a local one if not.

The mesh keeps sessions, L2 caches and rate-limit budgets in Redis, and the
tests use a real server. When nothing answers on the loopback port of
``AGENTMESH_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``), this starts
``redis-server`` there without persistence, installing it from Debian's packages
first if the machine lacks it. A non-loopback URL that does not answer is an
error: we never start servers for somebody else's address.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from urllib.parse import urlparse

DEFAULT_URL = "redis://127.0.0.1:6379/0"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def answers(host: str, port: int) -> bool:
    """True if a Redis server answers PING on host:port."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def install_redis() -> None:
    print("[setup] installing redis-server from Debian's packages", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "redis-server"], check=True, env=env)


def main() -> int:
    url = urlparse(os.environ.get("AGENTMESH_REDIS_URL", DEFAULT_URL))
    host, port = url.hostname or "127.0.0.1", url.port or 6379
    if answers(host, port):
        return 0
    if host not in LOOPBACK:
        print(f"error: Redis at {host}:{port} does not answer", file=sys.stderr)
        return 1
    if shutil.which("redis-server") is None:
        install_redis()
    print(f"[setup] starting redis-server on {host}:{port}", file=sys.stderr)
    subprocess.run(
        [
            "redis-server",
            "--daemonize",
            "yes",
            "--bind",
            host,
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            "",
        ],
        check=True,
    )
    for _ in range(50):
        if answers(host, port):
            return 0
        time.sleep(0.1)
    print(f"error: started redis-server but nothing answers on {host}:{port}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
