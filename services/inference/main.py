"""The inference service process: ``python -m services.inference`` or ``agentmesh-inference``."""

from __future__ import annotations

import sys

from services.inference.build import service_parts
from services.inference.config import InferenceConfig
from services.runtime.launch import run_service


def main() -> int:
    return run_service(InferenceConfig, service_parts)


if __name__ == "__main__":
    sys.exit(main())
