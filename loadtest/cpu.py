"""CPU seconds spent by mesh processes during a run (psutil), per process tree."""

from __future__ import annotations

from collections.abc import Iterable

import psutil


class CpuMeter:
    """Snapshot user+system CPU of processes (and their children) before and after a run."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._pids = pids
        self._start: dict[str, float] = {}

    @staticmethod
    def _cpu(pid: int) -> float:
        try:
            root = psutil.Process(pid)
            procs: Iterable[psutil.Process] = [root, *root.children(recursive=True)]
            total = 0.0
            for p in procs:
                try:
                    t = p.cpu_times()
                    total += t.user + t.system
                except psutil.NoSuchProcess:
                    pass
            return total
        except psutil.NoSuchProcess:
            return 0.0

    def start(self) -> None:
        self._start = {name: self._cpu(pid) for name, pid in self._pids.items()}

    def stop(self) -> dict[str, float]:
        return {name: self._cpu(pid) - self._start.get(name, 0.0) for name, pid in self._pids.items()}
