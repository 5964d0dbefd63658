"""Replica picking: rendezvous hashing on the prompt's prefix key, bounded by load.

Every router computes the same placement from the request alone, so router
replicas agree without talking: each replica gets a weight
``sha256(placement key ‖ replica)`` and the highest weight wins (rendezvous,
or highest-random-weight, hashing — adding or removing a replica moves only
the keys it wins or held). The placement key is the chain hash of the prompt
through its first non-system message: the conversation's root. All turns of a
session share it (so the session's growing history stays in one replica's KV
cache), different sessions spread evenly, and a shared system prompt is cached
once per replica.

The load bound (consistent hashing with bounded loads): a replica is skipped
while its load reaches ``ceil(c · (total + 1) / n)`` — and at least
``min_load`` requests, because at low load that formula would push the second
request of an idle mesh away from its cached prefix for no gain; the next
replica in the key's rendezvous order takes the request. Local observations only refine this:
a key recently served by a replica that is still within bound keeps going
there (it holds the freshest blocks), which matters after a load-bound detour.

Output: the candidates in preference order (for failover), each with why.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class Replica(Protocol):
    target: str

    @property
    def available(self) -> bool: ...

    def load_score(self) -> int: ...


def prefix_keys(messages: Sequence[tuple[str, ...]]) -> list[bytes]:
    """Chain hashes of a chat prompt, one per message (role, content, ...): key i covers messages 0..i."""
    keys: list[bytes] = []
    h = hashlib.sha256()
    for message in messages:
        h.update("\x00".join(message).encode() + b"\x01")
        keys.append(h.copy().digest())
    return keys


def placement_key(messages: Sequence[tuple[str, ...]]) -> bytes:
    """The chain key through the first non-system message (see module docstring)."""
    keys = prefix_keys(messages)
    if not keys:
        return b""
    for i, message in enumerate(messages):
        if message[0] != "system":
            return keys[i]
    return keys[-1]


def rendezvous_order(key: bytes, targets: Sequence[str]) -> list[str]:
    """Targets sorted by descending rendezvous weight for ``key`` (ties broken by name)."""

    def weight(target: str) -> bytes:
        return hashlib.sha256(key + b"\x00" + target.encode()).digest()

    return sorted(targets, key=lambda t: (weight(t), t), reverse=True)


@dataclass(frozen=True)
class Choice:
    replica: Replica
    reason: str  # affinity | affinity-recent | load-bound-spill | failover


class ReplicaPicker:
    def __init__(self, load_factor: float = 1.25, recent_keys: int = 10_000, min_load: int = 4) -> None:
        self.load_factor = load_factor
        self.min_load = min_load
        self._recent: OrderedDict[bytes, str] = OrderedDict()
        self._recent_max = recent_keys

    def bound(self, replicas: Sequence[Replica]) -> int:
        total = sum(r.load_score() for r in replicas)
        return max(self.min_load, math.ceil(self.load_factor * (total + 1) / max(1, len(replicas))))

    def candidates(self, key: bytes, replicas: Sequence[Replica]) -> list[Choice]:
        """Every available replica, best first."""
        live = [r for r in replicas if r.available]
        if not live:
            return []
        by_target = {r.target: r for r in live}
        order = [by_target[t] for t in rendezvous_order(key, list(by_target))]
        cap = self.bound(live)
        within = [r for r in order if r.load_score() < cap]
        first: Choice | None = None
        recent = self._recent.get(key)
        if recent in by_target and by_target[recent] in within:
            first = Choice(by_target[recent], "affinity" if by_target[recent] is order[0] else "affinity-recent")
        elif within:
            first = Choice(within[0], "affinity" if within[0] is order[0] else "load-bound-spill")
        else:
            first = Choice(order[0], "affinity")  # everyone is over the bound: keep affinity
        rest = [Choice(r, "failover") for r in order if r is not first.replica]
        return [first, *rest]

    def served(self, key: bytes, replica: Replica) -> None:
        """Record that ``replica`` served ``key`` (local refinement)."""
        self._recent[key] = replica.target
        self._recent.move_to_end(key)
        while len(self._recent) > self._recent_max:
            self._recent.popitem(last=False)


class Picker(Protocol):
    """What the generator needs from a placement strategy."""

    def candidates(self, key: bytes, replicas: Sequence[Replica]) -> list[Choice]: ...

    def served(self, key: bytes, replica: Replica) -> None: ...


class RoundRobinPicker:
    """Baseline for benchmarks: ignores the prompt, rotates over available replicas."""

    def __init__(self) -> None:
        self._next = 0

    def candidates(self, key: bytes, replicas: Sequence[Replica]) -> list[Choice]:
        live = sorted((r for r in replicas if r.available), key=lambda r: r.target)
        if not live:
            return []
        i = self._next % len(live)
        self._next += 1
        order = live[i:] + live[:i]
        return [Choice(order[0], "round-robin"), *(Choice(r, "failover") for r in order[1:])]

    def served(self, key: bytes, replica: Replica) -> None:
        return None


class LeastLoadedPicker:
    """Baseline for benchmarks: the replica with the lowest load score (ties by name)."""

    def candidates(self, key: bytes, replicas: Sequence[Replica]) -> list[Choice]:
        order = sorted((r for r in replicas if r.available), key=lambda r: (r.load_score(), r.target))
        return [Choice(r, "least-loaded" if i == 0 else "failover") for i, r in enumerate(order)]

    def served(self, key: bytes, replica: Replica) -> None:
        return None


def make_picker(name: str, load_factor: float = 1.25) -> Picker:
    """``prefix`` (ours), ``round-robin`` or ``least-loaded``."""
    if name == "round-robin":
        return RoundRobinPicker()
    if name == "least-loaded":
        return LeastLoadedPicker()
    return ReplicaPicker(load_factor)
