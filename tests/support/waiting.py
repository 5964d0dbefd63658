"""Waiting for a condition in tests without fixed sleeps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def eventually(condition: Callable[[], bool], within_s: float = 5.0, what: str = "condition") -> None:
    """Return once ``condition()`` holds; fail the test if it does not within ``within_s``."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {within_s} s")
        await asyncio.sleep(0.02)
