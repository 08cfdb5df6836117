"""Arena memory planning for intermediate tensors.

A small, dependency-free planner in the spirit of TensorFlow Lite Micro's
``GreedyMemoryPlanner``: each intermediate buffer has a size and an inclusive
lifetime ``[first_use, last_use]`` in op-index order, and the planner assigns
byte offsets inside a single arena so that buffers alive at the same time never
share bytes.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BufferReq", "Plan", "overlaps", "plan_greedy", "plan_linear", "render"]


@dataclass(frozen=True)
class BufferReq:
    """One buffer to place: size in bytes and inclusive lifetime in op indices."""

    size: int  # bytes, >= 0
    first_use: int  # index of the op that produces it
    last_use: int  # index of the last op that reads it (>= first_use)
    align: int = 64  # offset alignment in bytes, power of two


@dataclass(frozen=True)
class Plan:
    """Offsets (same order as the requests) and the arena size they need."""

    offsets: tuple[int, ...]
    total: int


def _align_up(value: int, align: int) -> int:
    # align is a validated power of two, so masking is exact.
    return (value + align - 1) & ~(align - 1)


def _is_int(value: object) -> bool:
    # bool is an int subclass but never a meaningful size/index here.
    return isinstance(value, int) and not isinstance(value, bool)


def _validate(reqs: Sequence[BufferReq]) -> None:
    for i, r in enumerate(reqs):
        for name in ("size", "first_use", "last_use", "align"):
            if not _is_int(getattr(r, name)):
                raise ValueError(f"request {i}: {name} must be an int, got {getattr(r, name)!r}")
        if r.size < 0:
            raise ValueError(f"request {i}: size must be >= 0, got {r.size}")
        if r.first_use < 0:
            raise ValueError(f"request {i}: first_use must be >= 0, got {r.first_use}")
        if r.last_use < r.first_use:
            raise ValueError(f"request {i}: last_use ({r.last_use}) < first_use ({r.first_use})")
        if r.align <= 0 or r.align & (r.align - 1):
            raise ValueError(f"request {i}: align must be a power of two, got {r.align}")


def _check_plan(reqs: Sequence[BufferReq], plan: Plan) -> None:
    if len(plan.offsets) != len(reqs):
        raise ValueError(f"plan has {len(plan.offsets)} offsets for {len(reqs)} requests")
    for i, off in enumerate(plan.offsets):
        if not _is_int(off) or off < 0:
            raise ValueError(f"plan offset {i} must be an int >= 0, got {off!r}")


def _total(reqs: Sequence[BufferReq], offsets: Sequence[int]) -> int:
    # Zero-size buffers own no bytes, so neither their offset nor their alignment
    # should grow the arena.
    used = [(r, off) for r, off in zip(reqs, offsets, strict=True) if r.size > 0]
    if not used:
        return 0
    end = max(off + r.size for r, off in used)
    # Rounding to the largest alignment keeps arenas placed back to back aligned.
    return _align_up(end, max(r.align for r, _ in used))


def plan_greedy(reqs: Sequence[BufferReq]) -> Plan:
    """Place buffers largest first, each at the lowest aligned offset that fits.

    Ties on size are broken by earlier ``first_use``, then by request index, so the
    result is deterministic. Zero-size buffers get offset 0 and never conflict.
    O(n^2) overall: one linear scan of the placed buffers per request.
    """
    _validate(reqs)
    offsets = [0] * len(reqs)
    order = sorted(range(len(reqs)), key=lambda i: (-reqs[i].size, reqs[i].first_use, i))

    # Placed buffers as (offset, end, first_use, last_use), kept sorted by offset so
    # the gap scan below visits candidates bottom-up.
    placed: list[tuple[int, int, int, int]] = []
    for i in order:
        r = reqs[i]
        if r.size == 0:
            continue
        candidate = 0
        for p_off, p_end, p_first, p_last in placed:
            if p_last < r.first_use or p_first > r.last_use:
                continue  # lifetimes disjoint: free to share bytes
            if candidate + r.size <= p_off:
                # Every conflicting buffer below ends at or before `candidate`, and
                # every later one starts at or above p_off, so this gap fits.
                break
            # Invariant: no aligned offset below `candidate` works, since each one
            # collides with some conflicting buffer already visited.
            candidate = max(candidate, _align_up(p_end, r.align))
        offsets[i] = candidate
        bisect.insort(placed, (candidate, candidate + r.size, r.first_use, r.last_use))
    return Plan(tuple(offsets), _total(reqs, offsets))


def plan_linear(reqs: Sequence[BufferReq]) -> Plan:
    """Give every buffer its own aligned slot, back to back in request order.

    Used when every tensor must stay readable after the run. Zero-size buffers get
    offset 0 (they own no bytes), matching :func:`plan_greedy`.
    """
    _validate(reqs)
    offsets = [0] * len(reqs)
    cursor = 0
    for i, r in enumerate(reqs):
        if r.size == 0:
            continue
        cursor = _align_up(cursor, r.align)
        offsets[i] = cursor
        cursor += r.size
    return Plan(tuple(offsets), _total(reqs, offsets))


def overlaps(reqs: Sequence[BufferReq], plan: Plan) -> list[tuple[int, int]]:
    """Return pairs ``(i, j)``, ``i < j``, live at a common op and sharing bytes.

    Empty for a valid plan. Zero-size buffers share no bytes, so never appear.
    """
    _validate(reqs)
    _check_plan(reqs, plan)
    # Sweep in first_use order so each buffer is only compared against buffers that
    # start before it dies, instead of all n^2 pairs when lifetimes are short.
    order = sorted((i for i, r in enumerate(reqs) if r.size > 0), key=lambda i: reqs[i].first_use)
    found: list[tuple[int, int]] = []
    for a, i in enumerate(order):
        ri, oi = reqs[i], plan.offsets[i]
        for j in order[a + 1 :]:
            rj, oj = reqs[j], plan.offsets[j]
            if rj.first_use > ri.last_use:
                break  # later buffers start even later
            if oi < oj + rj.size and oj < oi + ri.size:
                found.append((min(i, j), max(i, j)))
    found.sort()
    return found


_GLYPHS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def render(reqs: Sequence[BufferReq], plan: Plan, width: int = 60) -> str:
    """Draw the plan as text, one line per op index ``0..max(last_use)``.

    Each line shows the arena scaled to ``width`` columns with every live buffer
    drawn using the glyph of its index (``0-9a-zA-Z``, cycling), followed by the
    live buffers as ``index@offset+size``; a buffer that overlaps another live one
    in bytes is suffixed with ``!``.
    """
    _validate(reqs)
    _check_plan(reqs, plan)
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    if not reqs:
        return ""
    n_ops = max(r.last_use for r in reqs) + 1
    # Scale against the real extent too, so a hand-made plan with a wrong total
    # still draws inside the bar.
    extent = max([plan.total, 1] + [o + r.size for r, o in zip(reqs, plan.offsets, strict=True)])
    op_w = len(str(n_ops - 1))
    bad = {i for pair in overlaps(reqs, plan) for i in pair}
    # Bucket buffers by op once so each line only touches its live buffers.
    live_at: list[list[int]] = [[] for _ in range(n_ops)]
    for i, r in enumerate(reqs):
        for t in range(r.first_use, r.last_use + 1):
            live_at[t].append(i)
    lines: list[str] = []
    for t in range(n_ops):
        bar = ["."] * width
        live: list[str] = []
        for i in live_at[t]:
            r, off = reqs[i], plan.offsets[i]
            live.append(f"{i}@{off}+{r.size}" + ("!" if i in bad else ""))
            if r.size == 0:
                continue
            lo = min(off * width // extent, width - 1)
            # Ceil so even a 1-byte buffer gets at least one column. Column rounding can
            # make byte-adjacent buffers share a column; the later one simply wins, and
            # real overlaps are flagged in the list instead.
            hi = min(max(lo + 1, -(-(off + r.size) * width // extent)), width)
            bar[lo:hi] = _GLYPHS[i % len(_GLYPHS)] * (hi - lo)
        lines.append(f"op {t:>{op_w}} |{''.join(bar)}| " + " ".join(live))
    return "\n".join(line.rstrip() for line in lines)
