"""The matmul API from C: every rknn_matmul_type against a C reference loop, on the two
platforms whose type lists together cover all 13; the types a platform refuses in C are those
the Python API refuses."""

from __future__ import annotations

import re

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
