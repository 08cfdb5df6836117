"""The matmul API from C: every rknn_matmul_type against a C reference loop, on the two
platforms whose type lists together cover all 13; the types a platform refuses in C are those
the Python API refuses."""

from __future__ import annotations

import re

import pytest

import rknnrt as rk

ALL_TYPES = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15}


def python_creates(type_: int, platform: str, monkeypatch) -> bool:
    monkeypatch.setenv("RKNNRT_PLATFORM", platform)
    info, io, ctx = rk.rknn_matmul_info(), rk.rknn_matmul_io_attr(), rk.rknn_context()
    info.M, info.K, info.N, info.type = 4, 32, 64, type_
    created = rk.rknn_matmul_create(ctx, info, io) == rk.RKNN_SUCC
    if created:
        assert rk.rknn_matmul_destroy(ctx) == 0
    return created


def test_every_matmul_type_against_a_c_reference(programs, monkeypatch):
    ran = set()
    for platform in ("rk3588", "rk3576"):
        done = programs.run("matmul.c", RKNNRT_PLATFORM=platform)
        assert "wrong 0" in done.stdout, done.stdout + done.stderr
        rows = re.findall(r"^type (\d+) (\w+)( native_B)? (created|refused)$", done.stdout, re.M)
        assert len(rows) == 15  # 13 types, 2 of them again with native B
        created = {int(t) for t, _, native, state in rows if state == "created" and not native}
        refused = {int(t) for t, _, native, state in rows if state == "refused"}
        assert created | refused == ALL_TYPES and created
        for t in ALL_TYPES:
            assert python_creates(t, platform, monkeypatch) == (t in created), (platform, t)
        ran |= created
    assert ran == ALL_TYPES  # between them the two platforms run every type


@pytest.mark.slow
def test_every_layout_and_dynamic_shapes_from_c(programs):
    """matmul_layouts.c: B NORM/NATIVE/TP_NORM x AC NORM/NATIVE x two shapes per type (int4 B
    packed even-index-low along TP_NORM's [N, K]; type 5-8, 12, 15 with per-channel B), and
    dynamic shapes: B bound once while K and N stay, TP_NORM B rebound per (K, N)."""
    counts = {"rk3588": (6, 72, 18), "rk3576": (10, 120, 30)}  # types, cases, dynamic runs
    for platform, (n_types, n_cases, n_dynamic) in counts.items():
        done = programs.run("matmul_layouts.c", RKNNRT_PLATFORM=platform)
        assert done.stdout.rstrip().endswith("wrong 0"), done.stdout + done.stderr
        cases = re.findall(r"^case (\d+) B(\w+) AC(\w+) \S+ ok$", done.stdout, re.M)
        dynamic = re.findall(r"^dynamic (\d+) B(\w+) ok$", done.stdout, re.M)
        assert (len({c[0] for c in cases}), len(cases), len(dynamic)) == (
            n_types,
            n_cases,
            n_dynamic,
        ), platform
        assert {b for _, b, _ in cases} == {"NORM", "NATIVE", "TP_NORM"}
        tp_int4 = {t for t, b, _ in cases if b == "TP_NORM"} & {"7", "8", "10", "11", "12", "15"}
        assert tp_int4 == ({"10"} if platform == "rk3588" else {"7", "8", "11", "12", "15"})
