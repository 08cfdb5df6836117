"""Where a segmented program's materialised tensors live in the internal memory (design §5).

The converter plans every stored intermediate tensor at an offset of the internal memory
(model/meta.py MemoryPlan, a lifetime plan in graph order). The runtime materialises only the
tensors that cross between steps (NPU segments, CPU ops, custom ops); each of them that the
plan covers is placed at its planned offset, so the data is where a board keeps it: an
application that gives its own internal memory (rknn_set_internal_mem) sees it there, and two
contexts sharing one internal buffer in series overwrite each other's tensors as on a board.

The steps run the graph's nodes in an order close to, but not always equal to, the planned
one (a custom op's input conversions run with the op), so a placement is checked against the
step order: a tensor whose planned bytes would meet another placed tensor's while both are
live keeps a buffer of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...model.meta import MemoryPlan


def placements(
    plan: MemoryPlan,
    steps: Sequence[tuple[Sequence[str], Sequence[str]]],
    sizes: dict[str, int],
    limit: int,
) -> dict[str, int]:
    """name -> offset for the tensors to place. `steps`: (names read, names written) per step
    in run order; `sizes`: bytes of each materialised tensor that may be placed; `limit`: the
    internal memory's size."""
    planned = {t.name: t for t in plan.tensors}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for index, (reads, writes) in enumerate(steps):
        for name in writes:
            first.setdefault(name, index)
            last[name] = max(last.get(name, index), index)
        for name in reads:
            if name in first:
                last[name] = index
    placed: dict[str, int] = {}
    spans: list[tuple[int, int, int, int]] = []  # (offset, end, first step, last step)
    for name, size in sizes.items():
        tensor = planned.get(name)
        if tensor is None or tensor.size != size or name not in first:
            continue
        start, end = tensor.offset, tensor.offset + size
        if start < 0 or end > limit:
            continue
        lo, hi = first[name], last[name]
        if any(s < end and start < e and lo <= h and f <= hi for s, e, f, h in spans):
            continue
        placed[name] = start
        spans.append((start, end, lo, hi))
    return placed


def keep_guards(placed: dict[str, int], sizes: dict[str, int], step: object, guard: int,
                limit: int) -> None:  # fmt: skip
    """Unplace each custom output of `step` whose `guard` bytes after it (where a callback's
    stray write is caught) are not all inside the internal memory or meet a tensor the step
    reads or writes."""
    names = [*step.inputs, *step.mids, *step.outputs]  # type: ignore[attr-defined]
    for name in step.node.output:  # type: ignore[attr-defined]
        if name not in placed:
            continue
        start = placed[name] + sizes[name]
        end = start + guard
        if end > limit or any(
            other in placed and placed[other] < end and start < placed[other] + sizes[other]
            for other in names
            if other != name
        ):
            del placed[name]
