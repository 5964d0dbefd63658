"""Ctrl-C in ``agentmesh chat``: cancel the running turn, or end the chat at the prompt.

``asyncio.run`` turns SIGINT into cancelling the main task, so a
``KeyboardInterrupt`` handler inside the chat coroutine never runs and the
whole program ends mid-turn. The chat instead takes SIGINT with
``loop.add_signal_handler`` and decides here what it means: while a turn runs
it asks for that turn to be cancelled (the chat sends CancelTurn and goes on);
at the prompt it asks the chat to end.

The prompt is read on a daemon thread, not the default executor: a thread
blocked in ``input()`` cannot be interrupted, and ``asyncio.run`` would wait
for an executor thread before exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator


class Interrupts:
    """What the next Ctrl-C means; ``cancel`` is set during a turn, ``quit`` at the prompt."""

    def __init__(self) -> None:
        self.cancel = asyncio.Event()
        self.quit = asyncio.Event()
        self._turn_running = False

    def on_sigint(self) -> None:
        if self._turn_running:
            self.cancel.set()
        else:
            self.quit.set()

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """While a turn runs, Ctrl-C cancels it."""
        self.cancel.clear()
        self._turn_running = True
        try:
            yield
        finally:
            self._turn_running = False
            self.cancel.clear()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Take SIGINT for the duration of the chat (where the platform allows signal handlers)."""
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self.on_sigint)
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signal support
            yield
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)


def read_line(prompt: str) -> asyncio.Future[str | None]:
    """The next line typed at ``prompt`` (None at end of input), read on a daemon thread."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def deliver(line: str | None) -> None:
        if not future.done():
            future.set_result(line)

    def read() -> None:
        try:
            line: str | None = input(prompt)
        except EOFError:
            line = None
        with contextlib.suppress(RuntimeError):  # the loop closed: the chat is over
            loop.call_soon_threadsafe(deliver, line)

    threading.Thread(target=read, name="chat-input", daemon=True).start()
    return future
