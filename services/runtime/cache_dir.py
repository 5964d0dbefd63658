"""Where AgentMesh keeps what it derives once per machine: ``$AGENTMESH_CACHE_DIR``, or ``~/.cache/agentmesh``.

`make setup` provisions the embedded model there (``models/``), and the router
keeps its fitted ask classifier there (``asks/``), so that every process on
the machine reads it instead of fitting it again. Nothing in it is a source of
truth: each entry is rebuilt when missing, and a read-only folder only costs
the rebuild.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The folder (not created here)."""
    return Path(os.environ.get("AGENTMESH_CACHE_DIR") or Path.home() / ".cache" / "agentmesh")


__all__ = ["cache_dir"]
