"""Where the benchmark suite runs: repository paths, the Redis database, the mesh's API key, free ports.

Shared by the suite's section modules and by ``loadtest.relay``; nothing here
connects or starts anything.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "loadtest" / "results"
REDIS_URL = os.environ.get("AGENTMESH_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
API_KEY = "bench-key-0123"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
