"""One planner per distinct tool list, so a turn is planned against exactly its tenant's tools.

A planner's card index holds the embedded cards of one tool list. Tenants may
see different lists (an MCP server's ``tenants`` allow-list), and two turns
planned at once must never score against each other's cards, so
``Planners.for_list(tools)`` hands out the planner of that list's revision,
its cards prepared once (under a lock: concurrent first turns embed once). A
changed list (``tools/list_changed``) is a new revision and a new planner;
turns still planning on the old one finish on it. At most ``max_lists``
planners are kept, the least recently used dropped first.

Card texts are embedded once for every planner: ``MemoEmbedder`` remembers
the vectors of the texts it has embedded (bounded, least recently used out),
so a new list re-embeds only the cards of tools that are new or changed.
Without a ``new`` factory (unit tests with fakes) every list shares the one
planner, prepared again when the list changes.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from services.router.planning import Planner
from services.router.planning.embedding import Embedder, Vectors
from services.router.tools.lists import ToolList


class MemoEmbedder:
    """``inner``'s vectors, each text embedded once (at most ``max_texts`` remembered)."""

    def __init__(self, inner: Embedder, max_texts: int = 8192) -> None:
        self.inner = inner
        self.name = inner.name
        self._max = max_texts
        self._vectors: OrderedDict[str, Vectors] = OrderedDict()

    async def embed(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        fresh = dict(zip(missing, await self.inner.embed(missing), strict=True)) if missing else {}
        rows = []
        for t in texts:
            vector = fresh.get(t)
            if vector is None:
                vector = self._vectors[t] if t in self._vectors else (await self.inner.embed([t]))[0]
            rows.append(vector)
            self._vectors[t] = vector
            self._vectors.move_to_end(t)
        while len(self._vectors) > self._max:
            self._vectors.popitem(last=False)
        if not rows:
            return await self.inner.embed([])
        return np.stack(rows)


@dataclass
class _Entry:
    planner: Planner
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Planners:
    """The planner of each tool list (see module docstring)."""

    def __init__(self, first: Planner, new: Callable[[], Planner] | None = None, *, max_lists: int = 8) -> None:
        self.first = first
        self._new = new
        self._max = max_lists
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._shared = _Entry(first)

    @property
    def replans(self) -> bool:
        return self.first.replans

    async def for_list(self, tools: ToolList) -> Planner:
        """The planner for ``tools``, its cards loaded."""
        entry = self._entries.get(tools.revision)
        if entry is None:
            # The first list takes the first planner; each later one a new planner (or, without a factory, the one).
            entry = self._shared if self._new is None or not self._entries else _Entry(self._new())
            self._entries[tools.revision] = entry
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(tools.revision)
        async with entry.lock:
            await entry.planner.prepare(tools.specs)
        return entry.planner
