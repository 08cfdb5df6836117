"""Tests for rknnrt.toolkit.memplan, with hand-computed offsets in the TFLM style."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rknnrt.toolkit.memplan import (
    BufferReq,
    Plan,
    overlaps,
    plan_greedy,
    plan_linear,
    render,
)

B = BufferReq


def _check_valid(reqs: list[BufferReq], plan: Plan) -> None:
    assert len(plan.offsets) == len(reqs)
    assert overlaps(reqs, plan) == []
    for r, off in zip(reqs, plan.offsets, strict=True):
        assert off % r.align == 0
        assert off + r.size <= plan.total


# --- greedy: hand-computed cases -------------------------------------------------------


def test_greedy_empty() -> None:
    assert plan_greedy([]) == Plan((), 0)


def test_greedy_single_rounds_total_to_alignment() -> None:
    assert plan_greedy([B(1, 0, 0)]) == Plan((0,), 64)
    assert plan_greedy([B(100, 0, 3, align=8)]) == Plan((0,), 104)


def test_greedy_chain_reuses_freed_region() -> None:
    # B (largest) goes first at 0; A is live with B at op 1 so sits above it; C is
    # live with B but not with A (A dies at op 1), so it reuses A's bytes.
    reqs = [B(10, 0, 1, align=1), B(20, 1, 2, align=1), B(10, 2, 3, align=1)]
    plan = plan_greedy(reqs)
    assert plan == Plan((20, 0, 20), 30)
    _check_valid(reqs, plan)


def test_greedy_later_buffer_reuses_bottom_of_dead_one() -> None:
    # A at 0; C never meets A so also goes to 0; B meets both, so goes above A's end.
    reqs = [B(100, 0, 1, align=1), B(50, 0, 3, align=1), B(60, 2, 3, align=1)]
    plan = plan_greedy(reqs)
    assert plan == Plan((0, 100, 0), 150)
    _check_valid(reqs, plan)


def test_greedy_fills_gap_between_live_buffers() -> None:
    # Placement order A(50)=0, B(40)=50, C(30)=90. D is live with A and C but not B,
    # so it drops into B's bytes [50, 90) between them.
    reqs = [
        B(50, 0, 1, align=1),
        B(40, 0, 0, align=1),
        B(30, 0, 3, align=1),
        B(20, 1, 3, align=1),
    ]
    plan = plan_greedy(reqs)
    assert plan == Plan((0, 50, 90, 50), 120)
    _check_valid(reqs, plan)


def test_greedy_alignment_padding() -> None:
    # A=0 ends at 100; B (align 64) is padded up to 128. C (align 16) fits in the
    # padding: align_up(100, 16) = 112 and 112 + 10 <= 128. Highest end is B's 158,
    # rounded to the largest alignment (64) -> 192.
    reqs = [B(100, 0, 1), B(30, 0, 1), B(10, 1, 2, align=16)]
    plan = plan_greedy(reqs)
    assert plan == Plan((0, 128, 112), 192)
    _check_valid(reqs, plan)


def test_greedy_padding_pushes_past_gap() -> None:
    # Same as above but C needs 20 bytes: 112 + 20 > 128, so it goes above B at
    # align_up(158, 16) = 160; end 180 -> total 192.
    reqs = [B(100, 0, 1), B(30, 0, 1), B(20, 1, 2, align=16)]
    plan = plan_greedy(reqs)
    assert plan == Plan((0, 128, 160), 192)
    _check_valid(reqs, plan)


def test_greedy_tie_breaks() -> None:
    # Equal sizes: earlier first_use is placed first (gets the low offset)...
    assert plan_greedy([B(32, 2, 3, align=1), B(32, 1, 2, align=1)]).offsets == (32, 0)
    # ...and with equal first_use too, the lower index wins.
    assert plan_greedy([B(32, 0, 1, align=1), B(32, 0, 1, align=1)]).offsets == (0, 32)


def test_greedy_zero_size_buffers() -> None:
    # Zero-size buffers sit at 0, overlap nothing, and their alignment doesn't count.
    reqs = [B(0, 0, 5), B(8, 0, 5, align=8), B(0, 1, 1, align=1)]
    plan = plan_greedy(reqs)
    assert plan == Plan((0, 0, 0), 8)
    _check_valid(reqs, plan)
    assert plan_greedy([B(0, 0, 0), B(0, 0, 0)]) == Plan((0, 0), 0)


def test_greedy_disjoint_lifetimes_share_offset_zero() -> None:
    reqs = [B(64, 0, 0), B(128, 1, 1), B(64, 2, 2)]
    assert plan_greedy(reqs) == Plan((0, 0, 0), 128)


def test_greedy_accepts_tuple_and_single_op_lifetimes() -> None:
    reqs = (B(64, 3, 3), B(64, 3, 3), B(64, 4, 4))
    assert plan_greedy(reqs) == Plan((0, 64, 0), 128)


# --- linear ---------------------------------------------------------------------------


def test_linear_back_to_back_with_alignment() -> None:
    # cursor: A [0,100) -> B aligned to 128, [128,158) -> C aligned to 160, [160,170)
    # -> zero-size Z at 0 -> D (align 1) at 170, end 175 -> total align_up(175, 64).
    reqs = [B(100, 0, 1), B(30, 0, 1), B(10, 1, 2, align=16), B(0, 0, 0), B(5, 2, 2, align=1)]
    plan = plan_linear(reqs)
    assert plan == Plan((0, 128, 160, 0, 170), 192)
    _check_valid(reqs, plan)


def test_linear_ignores_lifetimes() -> None:
    reqs = [B(64, 0, 0), B(64, 1, 1), B(64, 2, 2)]
    assert plan_linear(reqs) == Plan((0, 64, 128), 192)
    assert plan_linear([]) == Plan((), 0)


# --- overlaps -------------------------------------------------------------------------


def test_overlaps_detects_bad_plan() -> None:
    reqs = [B(64, 0, 1), B(64, 1, 2), B(64, 3, 4)]
    # A and B share op 1 and bytes [32, 64); C shares bytes with A but not time.
    assert overlaps(reqs, Plan((0, 32, 0), 128)) == [(0, 1)]
    # Byte-adjacent is not overlapping.
    assert overlaps(reqs, Plan((0, 64, 0), 128)) == []


def test_overlaps_reports_all_pairs_sorted() -> None:
    reqs = [B(10, 0, 2, align=1), B(10, 1, 1, align=1), B(10, 2, 2, align=1), B(0, 0, 2)]
    # Everything at 0: 0-1 (op 1), 0-2 (op 2); 1-2 never meet; zero-size never conflicts.
    assert overlaps(reqs, Plan((0, 0, 0, 0), 10)) == [(0, 1), (0, 2)]


def test_overlaps_rejects_mismatched_plan() -> None:
    with pytest.raises(ValueError, match=r"2 offsets for 1 requests"):
        overlaps([B(1, 0, 0)], Plan((0, 0), 64))
    with pytest.raises(ValueError, match=r"plan offset 0 .*>= 0"):
        overlaps([B(1, 0, 0)], Plan((-1,), 64))


# --- validation -----------------------------------------------------------------------


@pytest.mark.parametrize("planner", [plan_greedy, plan_linear])
@pytest.mark.parametrize(
    ("bad", "pattern"),
    [
        (B(-1, 0, 0), r"^request 1: size must be >= 0, got -1$"),
        (B(8, 3, 2), r"^request 1: last_use \(2\) < first_use \(3\)$"),
        (B(8, 0, 0, align=3), r"^request 1: align must be a power of two, got 3$"),
        (B(8, 0, 0, align=0), r"^request 1: align must be a power of two, got 0$"),
        (B(8, 0, 0, align=-4), r"^request 1: align must be a power of two, got -4$"),
        (B(8, -1, 0), r"^request 1: first_use must be >= 0, got -1$"),
        (B(8.0, 0, 0), r"^request 1: size must be an int, got 8\.0$"),  # type: ignore[arg-type]
    ],
)
def test_validation_names_bad_index(planner, bad: BufferReq, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        planner([B(8, 0, 0), bad, B(8, 0, 0)])


def test_validation_reports_first_bad_index() -> None:
    with pytest.raises(ValueError, match=r"^request 0: "):
        plan_greedy([B(8, 1, 0), B(-1, 0, 0)])


# --- render ---------------------------------------------------------------------------


def test_render_one_line_per_op() -> None:
    reqs = [B(10, 0, 1, align=1), B(20, 1, 2, align=1), B(10, 2, 3, align=1)]
    plan = plan_greedy(reqs)
    lines = render(reqs, plan, width=30).splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("op 0 |") and lines[0].endswith("0@20+10")
    assert lines[1].endswith("0@20+10 1@0+20")
    assert lines[3].endswith("2@20+10")
    # Bar is exactly `width` columns: B fills the first 20/30 of it at op 1.
    bar = lines[1].split("|")[1]
    assert bar == "1" * 20 + "0" * 10
    assert render([], Plan((), 0)) == ""


def test_render_flags_overlaps_and_idle_ops() -> None:
    reqs = [B(64, 0, 1), B(64, 1, 1), B(64, 3, 3)]
    text = render(reqs, Plan((0, 32, 0), 128))
    lines = text.splitlines()
    assert len(lines) == 4
    assert lines[1].endswith("0@0+64! 1@32+64!")
    assert lines[2] == "op 2 |" + "." * 60 + "|"  # nothing live at op 2


# --- scale ----------------------------------------------------------------------------


@pytest.mark.slow  # a scale check; the property tests cover the same planner
def test_greedy_2000_buffers() -> None:
    rng = random.Random(1234)
    reqs = []
    for _ in range(2000):
        first = rng.randrange(0, 1500)
        align = rng.choice([1, 16, 64])
        reqs.append(B(rng.randrange(0, 1 << 20), first, first + rng.randrange(0, 8), align))
    plan = plan_greedy(reqs)
    _check_valid(reqs, plan)
    assert plan.total < plan_linear(reqs).total
    # Everything live at once is the O(n^2) worst case; it must still finish promptly.
    allive = [B(r.size, 0, 1, r.align) for r in reqs]
    _check_valid(allive, plan_greedy(allive))


# --- properties -----------------------------------------------------------------------

ALIGNS = st.sampled_from([1, 2, 4, 8, 16, 64])


@st.composite
def requests(draw, uniform_align: bool = False) -> list[BufferReq]:
    n = draw(st.integers(0, 12))
    common = draw(ALIGNS)
    reqs = []
    for _ in range(n):
        align = common if uniform_align else draw(ALIGNS)
        first = draw(st.integers(0, 10))
        last = draw(st.integers(first, 12))
        if uniform_align:
            size = draw(st.integers(0, 8)) * align  # multiples: no padding anywhere
        else:
            size = draw(st.integers(0, 300))
        reqs.append(B(size, first, last, align))
    return reqs


def _live(reqs: list[BufferReq], t: int) -> list[BufferReq]:
    return [r for r in reqs if r.first_use <= t <= r.last_use]


def _op_range(reqs: list[BufferReq]) -> range:
    return range(max((r.last_use for r in reqs), default=-1) + 1)


@settings(max_examples=100, deadline=None)
@given(requests())
def test_property_greedy_valid_and_bounded(reqs: list[BufferReq]) -> None:
    plan = plan_greedy(reqs)
    _check_valid(reqs, plan)
    for t in _op_range(reqs):
        live = _live(reqs, t)
        # Live buffers are pairwise byte-disjoint, so their raw sizes must fit.
        assert plan.total >= sum(r.size for r in live)
        assert plan.total >= max((r.size for r in live), default=0)
    # Each buffer lands at most (align - 1) above the end of an earlier-placed one,
    # so the arena never exceeds the sum of sizes plus per-buffer worst-case padding.
    used = [r for r in reqs if r.size]
    if used:
        bound = sum(r.size + r.align - 1 for r in used)
        biggest = max(r.align for r in used)
        assert plan.total <= (bound + biggest - 1) // biggest * biggest
    assert len(render(reqs, plan).splitlines()) == len(_op_range(reqs))


@settings(max_examples=100, deadline=None)
@given(requests(uniform_align=True))
def test_property_uniform_align_beats_linear(reqs: list[BufferReq]) -> None:
    # With one alignment and sizes that are multiples of it there is no padding, so
    # the live-sum lower bound is exact and greedy can never lose to linear. (With
    # mixed alignments greedy's size-first order can pad more than linear's order.)
    greedy, linear = plan_greedy(reqs), plan_linear(reqs)
    _check_valid(reqs, greedy)
    _check_valid(reqs, linear)
    peak = max((sum(r.size for r in _live(reqs, t)) for t in _op_range(reqs)), default=0)
    assert peak <= greedy.total <= linear.total == sum(r.size for r in reqs)


@settings(max_examples=60, deadline=None)
@given(requests())
def test_property_linear_valid(reqs: list[BufferReq]) -> None:
    plan = plan_linear(reqs)
    _check_valid(reqs, plan)
    # Linear never shares bytes, regardless of lifetimes.
    forever = [B(r.size, 0, 0, r.align) for r in reqs]
    assert overlaps(forever, plan) == []


def test_greedy_can_exceed_linear_with_mixed_alignments() -> None:
    # Documents why the greedy <= linear property is only checked for one alignment:
    # greedy places the 10-byte buffer first, and the 8-byte align-4 buffer then pads
    # past it; linear's request order happens to pack tighter.
    reqs = [B(8, 1, 1, align=4), B(10, 0, 5, align=2), B(3, 0, 4, align=1), B(3, 0, 2, align=1)]
    assert plan_greedy(reqs) == Plan((12, 0, 20, 23), 28)
    assert plan_linear(reqs) == Plan((0, 8, 18, 21), 24)
