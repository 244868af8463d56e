"""Process-tree figures from /proc for the benchmarks: members, memory, CPU time."""

from __future__ import annotations

import os
import threading


def tree(root: int) -> list[int]:
    """``root`` and all its descendants."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def status_kb(pid: int, field: str) -> int:
    """A ``/proc/<pid>/status`` field in kB (VmRSS, VmHWM), 0 if the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime (+ reaped children's) of the given processes, in seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15])
    return total / tick


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class TreeMemory(threading.Thread):
    """Samples the summed VmRSS of a process tree (default: this process's) every 0.2 s and
    remembers each member's VmHWM."""

    def __init__(self, pid: int | None = None) -> None:
        super().__init__(daemon=True)
        self.pid = os.getpid() if pid is None else pid
        self.peak_sum_kb = 0
        self.hwm_kb: dict[int, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            pids = tree(self.pid)
            self.peak_sum_kb = max(self.peak_sum_kb, sum(status_kb(p, "VmRSS") for p in pids))
            for p in pids:
                self.hwm_kb[p] = max(self.hwm_kb.get(p, 0), status_kb(p, "VmHWM"))
            self.stop.wait(0.2)

    @property
    def peak_gb(self) -> float:
        """The sampled peak of the summed RSS (a lone process: its own high-water mark)."""
        peak = self.peak_sum_kb if len(self.hwm_kb) >= 2 else max(self.peak_sum_kb, sum(self.hwm_kb.values()))
        return peak / 1024 / 1024
