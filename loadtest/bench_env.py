"""Where the benchmark suite runs: repository paths, the Redis database, the mesh's API key.

Shared by the suite's section modules and by ``loadtest.relay``; nothing here
connects or starts anything.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "loadtest" / "results"
REDIS_URL = os.environ.get("AGENTMESH_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
API_KEY = "bench-key-0123"
