"""Logging setup: one line per record with the service name and request id."""

from __future__ import annotations

import logging
import sys

from services.runtime.context import REQUEST_ID


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get() or "-"
        return True


def setup_logging(service: str, level: str) -> None:
    """Configure the root logger for a service process (stderr, one line per record)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_RequestIdFilter())
    handler.setFormatter(
        logging.Formatter(f"%(asctime)s %(levelname)s {service} [%(request_id)s] %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
