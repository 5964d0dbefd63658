"""Admission tickets of one Converse stream's turns, by turn id, so each turn's TurnCompleted frees its own.

The gateway admits every StartTurn before relaying it and must give each
ticket back exactly once: when that turn's TurnCompleted comes back from the
router (answered, cancelled or failed), or when the stream ends. Keying by
turn id, never by arrival order, is what lets a cancelled turn free its slot
while a later one still runs; a retried turn id may hold two tickets at once.
"""

from __future__ import annotations

from collections import deque

from gateway.admission import Ticket


class TurnTickets:
    """Admission tickets of a stream's turns, by turn id (a retried id may hold two)."""

    def __init__(self) -> None:
        self._by_turn: dict[str, deque[Ticket]] = {}

    def add(self, turn_id: str, ticket: Ticket) -> None:
        self._by_turn.setdefault(turn_id, deque()).append(ticket)

    def pop(self, turn_id: str) -> Ticket | None:
        queue = self._by_turn.get(turn_id)
        if not queue:
            return None
        ticket = queue.popleft()
        if not queue:
            del self._by_turn[turn_id]
        return ticket

    def turn_ids(self) -> list[str]:
        return list(self._by_turn)

    def drain(self) -> list[Ticket]:
        tickets = [t for queue in self._by_turn.values() for t in queue]
        self._by_turn.clear()
        return tickets
