"""``python -m services.cli``: the agentmesh command."""

from __future__ import annotations

import sys

from services.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
