"""Process entry points: config → logging → ``uvloop.run(serve(config, build))``, with clean failures.

Every service's ``main()`` is ``run_service(TheConfig, build)``: ``build`` makes
that service's parts and ``lifecycle.serve`` does the rest. A config error
prints ``<service>: error: <one line>`` and exits 2; a start-up failure
(port taken, Redis unreachable when required) prints one line and exits 1.
Neither prints a traceback. Nothing happens at import time, which matters for
vLLM: its engine core is started with multiprocessing *spawn*, which re-imports
the entry module in the child.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TypeVar

import uvloop

from services.runtime.config import ConfigError, ServiceConfig, load_config
from services.runtime.lifecycle import Build, serve
from services.runtime.logs import setup_logging
from services.runtime.server import StartupError

C = TypeVar("C", bound=ServiceConfig)

EXIT_CONFIG = 2
EXIT_STARTUP = 1


def run_service(config_cls: type[C], build: Build[C], argv: Sequence[str] | None = None) -> int:
    """Load the config, set up logging and serve the service ``build`` makes on uvloop; return the exit code."""
    name = config_cls.SERVICE_NAME
    try:
        config = load_config(config_cls, argv)
    except ConfigError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    setup_logging(name, config.log_level)
    try:
        uvloop.run(serve(config, build))
    except StartupError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return EXIT_STARTUP
    except KeyboardInterrupt:
        return 130
    return 0
