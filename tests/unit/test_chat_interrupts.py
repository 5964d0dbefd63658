"""``agentmesh chat``: a real SIGINT during a turn cancels that turn and the chat goes on; at the prompt it quits.

``asyncio.run`` turns SIGINT into cancelling the main task, so before the chat took SIGINT itself, Ctrl-C
ended the program mid-turn without sending CancelTurn.
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
from collections.abc import AsyncIterator

from agentmesh_client import TextDelta, TurnCompleted, TurnStarted
from agentmesh_client.events import Usage
from services.cli.chat import chat_loop
from services.cli.interrupts import Interrupts
from tests.support.waiting import eventually


class FakeTurn:
    """A turn that streams one delta, then waits until cancelled and ends ABORTED."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    async def cancel(self) -> None:
        self.cancelled.set()

    async def _events(self) -> AsyncIterator[object]:
        yield TurnStarted(session_id="s1", turn_id="t1", request_id="r1", trace_id="")
        yield TextDelta(text="Once upon", turn_id="t1")
        await self.cancelled.wait()
        yield TurnCompleted(
            turn_id="t1",
            usage=Usage(prompt_tokens=10, completion_tokens=2),
            finish_reason="aborted",
            ttft_s=None,
            cached=False,
            tool_rounds=0,
            generations=1,
            tool_selection="skipped",
            total_s=0.1,
        )

    def __aiter__(self) -> AsyncIterator[object]:
        return self._events()


async def test_ctrl_c_cancels_the_turn_then_quits_at_the_prompt() -> None:
    turns: list[FakeTurn] = []
    out = io.StringIO()
    lines = ["tell me a story"]
    prompts: list[asyncio.Future[str | None]] = []

    def prompt(_: str) -> asyncio.Future[str | None]:
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        if lines:
            future.set_result(lines.pop(0))
        prompts.append(future)  # later prompts wait: the user types nothing more
        return future

    def new_turn(message: str) -> FakeTurn:
        turns.append(FakeTurn())
        return turns[-1]

    interrupts = Interrupts()
    with interrupts.installed():
        chat = asyncio.create_task(chat_loop(new_turn, out, interrupts, prompt=prompt))  # type: ignore[arg-type]
        await eventually(lambda: "Once upon" in out.getvalue(), 5, "the turn streaming")
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C during the turn
        await eventually(lambda: len(prompts) == 2, 5, "the chat back at the prompt")
        assert turns[0].cancelled.is_set() and not chat.done()
        assert "[cancelled]" in out.getvalue()
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C at the prompt
        await asyncio.wait_for(chat, 5)
    assert len(turns) == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is given back


async def test_ctrl_c_means_cancel_during_a_turn_and_quit_at_the_prompt() -> None:
    interrupts = Interrupts()
    with interrupts.turn():
        interrupts.on_sigint()
        assert interrupts.cancel.is_set() and not interrupts.quit.is_set()
    assert not interrupts.cancel.is_set()
    interrupts.on_sigint()
    assert interrupts.quit.is_set()
