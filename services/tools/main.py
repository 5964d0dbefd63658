"""The tool executor process: ``python -m services.tools`` or ``agentmesh-tools``."""

from __future__ import annotations

import sys

from services.runtime.launch import run_service
from services.tools.build import service_parts
from services.tools.config import ToolsConfig


def main() -> int:
    return run_service(ToolsConfig, service_parts)


if __name__ == "__main__":
    sys.exit(main())
