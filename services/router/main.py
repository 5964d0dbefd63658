"""The router process: ``python -m services.router`` or ``agentmesh-router``."""

from __future__ import annotations

import sys

from services.router.build import service_parts
from services.router.config import RouterConfig
from services.runtime.launch import run_service


def main() -> int:
    return run_service(RouterConfig, service_parts)


if __name__ == "__main__":
    sys.exit(main())
