"""The gateway process: ``python -m gateway`` or ``agentmesh-gateway``."""

from __future__ import annotations

import sys

from gateway.build import service_parts
from gateway.config import GatewayConfig
from services.runtime.launch import run_service


def main() -> int:
    return run_service(GatewayConfig, service_parts)


if __name__ == "__main__":
    sys.exit(main())
