"""The simulated NPU of one platform: its cores and the queue of jobs waiting for them.

Every rknn_run is a job that asks the Device for cores (`submit`), runs once they are granted
and gives them back (`release`). The rules (docs/device.md):

- A job may use the cores its context's core mask allows (`cores_for`): AUTO any one idle core
  (the lowest-numbered), CORE_0/1/2 that core, CORE_0_1 / CORE_0_1_2 / ALL every core of the mask
  at once (the splittable ops run across them, the others on core 0: facts §5.10). A
  multi-batch model takes up to rknn_set_batch_core_num cores at once.
- A job starts at once when its cores are idle and no job is waiting. Otherwise it waits, and
  waiting jobs start in priority order (PRIOR_HIGH, MEDIUM, LOW; first come first served within
  one priority). A waiting job never overtakes a higher-ranked waiting job on a core that job
  may use, so a multi-core job is not starved by a stream of single-core ones.

The Device is process-wide per platform (`get`), as the NPU is on a board: contexts of one
process share it. `hold` keeps cores busy for tests ("a long job" that the test ends).
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

# rknn_core_mask values (rknn_api.h) the scheduler interprets.
CORE_AUTO = 0
CORE_ALL = 0xFFFF

# Priority rank: lower starts first (RKNN_FLAG_PRIOR_HIGH / MEDIUM / LOW). Holds go first.
RANKS = {"HIGH": 0, "MEDIUM": 1, "LOW": 2}
_HOLD_RANK = -1
_GRANTS_KEPT = 4096


def cores_for(mask: int, cores: int) -> tuple[tuple[int, ...], int]:
    """(cores a job may use, how many of them it takes at once) for an rknn_core_mask value.

    AUTO: any one core. ALL: every core. Other masks: the cores whose bits are set, all at once
    (one bit = that single core)."""
    if mask == CORE_AUTO:
        return tuple(range(cores)), 1
    if mask == CORE_ALL:
        chosen = tuple(range(cores))
    else:
        chosen = tuple(c for c in range(cores) if mask >> c & 1)
    return chosen, len(chosen)


@dataclass(eq=False, slots=True)
class Request:
    """One job's claim on cores: waiting, then granted `cores`, then done (or cancelled)."""

    allowed: tuple[int, ...]
    count: int
    rank: int
    seq: int
    tag: object  # who asked: (context handle, frame id) for runs, a string for holds
    state: str = "waiting"  # waiting -> granted -> done, or waiting -> cancelled
    cores: tuple[int, ...] = ()
    granted_at: float = 0.0


@dataclass
class CoreStats:
    """What one core did since the Device was made."""

    jobs: int = 0
    busy_s: float = 0.0


class Device:
    """The NPU cores of one platform, with a priority queue of waiting jobs."""

    def __init__(self, name: str, cores: int) -> None:
        self.name = name
        self.cores = cores
        # One plain Lock (cheaper than the default RLock) guards everything; the Condition on
        # it wakes waiting jobs.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._sleepers = 0  # threads waiting on _cond: release skips notify_all without any
        self._owner: list[Request | None] = [None] * cores
        self._queue: list[Request] = []  # waiting requests, by (rank, seq)
        self._seq = itertools.count()
        self._jobs = [0] * cores
        self._busy_s = [0.0] * cores
        # (tag, cores) of every grant, oldest first (the last _GRANTS_KEPT): which core ran what.
        self.grants: deque[tuple[object, tuple[int, ...]]] = deque(maxlen=_GRANTS_KEPT)

    def __repr__(self) -> str:
        return f"Device({self.name!r}, cores={self.cores})"

    @property
    def stats(self) -> list[CoreStats]:
        """Per core: jobs granted and seconds held since the Device was made."""
        with self._lock:
            return [CoreStats(j, b) for j, b in zip(self._jobs, self._busy_s)]

    # -- jobs -------------------------------------------------------------------------------
    def submit(self, allowed: tuple[int, ...], count: int, priority: str,
               tag: object = "") -> Request:  # fmt: skip
        """Queue a job for `count` of the `allowed` cores; it may be granted at once."""
        return self._submit(allowed, count, RANKS[priority], tag)

    def _submit(self, allowed: tuple[int, ...], count: int, rank: int, tag: object) -> Request:
        with self._lock:
            req = Request(allowed, count, rank, next(self._seq), tag)
            if not self._queue:  # the common case: nobody waits, take idle cores if any
                owner = self._owner
                if count == 1:
                    for core in allowed:
                        if owner[core] is None:
                            self._grant(req, (core,))
                            return req
                else:
                    idle = [c for c in allowed if owner[c] is None]
                    if len(idle) >= count:
                        self._grant(req, tuple(idle[:count]))
                        return req
            bisect.insort(self._queue, req, key=_key)
            self._schedule()
            return req

    def wait(self, req: Request, timeout: float | None = None) -> bool:
        """Block until `req` is granted (True), cancelled or `timeout` seconds pass (False)."""
        if req.state == "granted":
            return True
        with self._lock:
            self._sleepers += 1
            try:
                self._cond.wait_for(lambda: req.state != "waiting", timeout)
            finally:
                self._sleepers -= 1
            return req.state == "granted"

    def cancel(self, req: Request) -> bool:
        """Withdraw a waiting request; False if it was already granted (or finished)."""
        with self._lock:
            if req.state != "waiting":
                return False
            self._queue.remove(req)
            req.state = "cancelled"
            self._schedule()  # a withdrawn job may have been blocking lower-ranked ones
            if self._sleepers:
                self._cond.notify_all()
            return True

    def release(self, req: Request) -> None:
        """Give back the cores of a granted request and start the waiting jobs that fit."""
        with self._lock:
            if req.state != "granted":
                return
            busy = time.perf_counter() - req.granted_at
            for core in req.cores:
                self._owner[core] = None
                self._busy_s[core] += busy
            req.state = "done"
            if self._queue:
                self._schedule()
            if self._sleepers:
                self._cond.notify_all()

    def acquire(self, allowed: tuple[int, ...], count: int, priority: str,
                tag: object = "") -> Request:  # fmt: skip
        """submit + wait without a time limit: the blocking rknn_run path."""
        req = self._submit(allowed, count, RANKS[priority], tag)
        if req.state != "granted":
            self.wait(req)
        return req

    # -- test hooks and observation ------------------------------------------------------------
    def hold(self, cores: Iterable[int], tag: str = "hold") -> Request:
        """Keep `cores` busy (ahead of every queued job) until `release`: a test's long job."""
        chosen = tuple(cores)
        req = self._submit(chosen, len(chosen), _HOLD_RANK, tag)
        self.wait(req)
        return req

    def waiting(self) -> list[object]:
        """Tags of the waiting jobs, in the order they will be considered."""
        with self._lock:
            return [r.tag for r in self._queue]

    def busy(self) -> list[object]:
        """Per core, the tag of the job holding it (None when idle)."""
        with self._lock:
            return [None if r is None else r.tag for r in self._owner]

    def wait_until(self, predicate: Callable[[list[object], list[object]], bool],
                   timeout: float = 10.0) -> bool:  # fmt: skip
        """Block until `predicate(waiting tags, per-core tags of the running jobs)` holds
        (looked at whenever the queue changes, and every 50 ms); False after `timeout` s."""
        deadline = time.monotonic() + timeout
        with self._lock:
            self._sleepers += 1
            try:
                while not predicate(
                    [r.tag for r in self._queue],
                    [None if r is None else r.tag for r in self._owner],
                ):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(min(left, 0.05))
                return True
            finally:
                self._sleepers -= 1

    # -- scheduling (with the lock held) --------------------------------------------------------
    def _grant(self, req: Request, cores: tuple[int, ...]) -> None:
        req.cores = cores
        req.state = "granted"
        req.granted_at = time.perf_counter()
        for core in cores:
            self._owner[core] = req
            self._jobs[core] += 1
        self.grants.append((req.tag, cores))

    def _schedule(self) -> None:
        """Start waiting jobs in (priority, arrival) order; a job that cannot start reserves the
        cores it may use against every job behind it."""
        reserved: set[int] = set()
        started = False
        for req in list(self._queue):
            idle = [c for c in req.allowed if self._owner[c] is None and c not in reserved]
            if len(idle) >= req.count:
                self._queue.remove(req)
                self._grant(req, tuple(idle[: req.count]))
                started = True
            else:
                reserved.update(req.allowed)
        if started and self._sleepers:
            self._cond.notify_all()


def _key(req: Request) -> tuple[int, int]:
    return req.rank, req.seq


_devices: dict[str, Device] = {}
_devices_lock = threading.Lock()


def get(name: str, cores: int) -> Device:
    """The process-wide Device of platform `name` (made on first use with `cores` cores)."""
    dev = _devices.get(name)
    if dev is None:
        with _devices_lock:
            dev = _devices.setdefault(name, Device(name, max(1, cores)))
    return dev
