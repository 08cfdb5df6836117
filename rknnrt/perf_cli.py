"""`rknnrt perf`: the table a board prints, and a comparison of SoCs (docs/performance.md).

    rknnrt perf MODEL [--target SOC] [--core-mask M] [--int8] [--host]
    rknnrt perf --compare rk3588,rk3576,rk3566 MODEL [--int8]

MODEL is an rknnrt model file or an ONNX model (converted for --target first; --int8 quantises
it with a few random calibration inputs, which is enough for timing and memory).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from . import board_eval
from .core import platforms
from .core.board import perf
from .model import container, targets
from .model.errors import ModelFormatError
from .model.meta import ModelMeta

Loader = Callable[[str | None, str], tuple[bytes, str]]


def add_parser(sub: argparse._SubParsersAction, load: Loader) -> None:
    """Register `perf` (cli.py calls this; `load` turns MODEL into model bytes and a name)."""
    p = sub.add_parser("perf", help="the per-layer table a board prints, with board estimates")
    p.add_argument("model", nargs="?", help="rknnrt model file or ONNX model")
    p.add_argument("--target", default=targets.DEFAULT_PLATFORM,
                   help=f"target platform (default {targets.DEFAULT_PLATFORM})")  # fmt: skip
    p.add_argument("--core-mask", default="0",
                   help="rknn_core_mask, e.g. 0x7 = CORE_0_1_2 (default 0: AUTO)")  # fmt: skip
    p.add_argument("--compare", metavar="SOCS",
                   help="comma-separated SoCs: one line each (ms, FPS, memory)")  # fmt: skip
    p.add_argument("--int8", action="store_true",
                   help="ONNX models: quantise to int8 (random calibration inputs)")  # fmt: skip
    p.add_argument("--host", action="store_true",
                   help="Time(us) and PERF_RUN in host times (RKNNRT_PERF_HOST=1)")  # fmt: skip
    p.set_defaults(func=lambda args: run(args, load))


def _int8(path: str, target: str) -> bytes:
    import onnx  # the converter is needed only here

    from .toolkit import RKNN

    model = onnx.load(path)
    rknn = RKNN()
    if rknn.config(target_platform=target) != 0 or rknn.load_onnx(model) != 0:
        raise SystemExit(f"E perf: conversion failed: {rknn.last_error}")
    dims = [[d.dim_value or 1 for d in i.type.tensor_type.shape.dim] for i in model.graph.input
            if i.name not in {t.name for t in model.graph.initializer}]  # fmt: skip
    rng = np.random.default_rng(0)
    sample = [rng.random(d, dtype=np.float32) for d in dims]
    if rknn.build(do_quantization=True, dataset=[sample]) != 0:
        raise SystemExit(f"E perf: conversion failed: {rknn.last_error}")
    return rknn.model_bytes()


def _model(args: argparse.Namespace, load: Loader) -> tuple[bytes, str]:
    if args.int8 and args.model and args.model.lower().endswith(".onnx"):
        return _int8(args.model, args.target), f"{args.model} (int8 for {args.target})"
    return load(args.model, args.target)


def compare_lines(blob: bytes, socs: list[str], core_mask: int = 0) -> list[str]:
    """One line per SoC: the board model's ms, FPS and memory for this model's layers."""
    try:
        sections = container.read(memoryview(blob))
        meta = ModelMeta.from_json(sections.metadata, len(sections.weights))
    except ModelFormatError as exc:
        raise SystemExit(f"E perf: {exc}") from None
    weights = np.frombuffer(sections.weights, np.uint8)
    lines = [f"{'SoC':<8} {'cores':>5} {'est ms':>8} {'FPS':>7} {'weights MB':>10} "
             f"{'internal MB':>11}  model"]  # fmt: skip
    for soc in socs:
        try:
            platform = platforms.get(soc)
        except KeyError:
            raise SystemExit(f"E perf: unknown SoC {soc!r}") from None
        cores = max(1, bin(core_mask & ((1 << platform.npu_cores) - 1)).count("1"))
        view = perf.board_view(meta, bytes(sections.graph), weights, platform, cores)
        if not view.model.known:
            lines.append(f"{soc:<8} {'':>5} {'-':>8} {'-':>7} {'-':>10} {'-':>11}  none")
            continue
        us = view.run_us()
        weight, internal = view.memory()
        note = "calibrated" if view.model.board and view.model.board.calibrated else "scaled"
        lines.append(f"{soc:<8} {cores:>5} {us / 1e3:>8.2f} {1e6 / us:>7.1f} "
                     f"{weight / 1e6:>10.2f} {internal / 1e6:>11.2f}  {note}")  # fmt: skip
    several = [soc for soc in socs if platforms.get(soc).npu_cores > 1]
    if several and not core_mask:
        lines.append(f"note: one NPU core each (core mask AUTO runs a model on one core); "
                     f"--core-mask 0x7 (CORE_0_1_2) lets {', '.join(several)} split layers "
                     "across their cores")  # fmt: skip
    elif core_mask:
        lines.append(f"note: cores from --core-mask {core_mask:#x}, per SoC as many of those "
                     "as it has")  # fmt: skip
    return lines


def run(args: argparse.Namespace, load: Loader) -> int:
    try:
        mask = int(args.core_mask, 0)
    except ValueError:
        raise SystemExit(f"E perf: --core-mask {args.core_mask!r} is not a number") from None
    try:
        blob, name = _model(args, load)
    except OSError as exc:
        raise SystemExit(f"E perf: cannot read {args.model!r}: {exc.strerror or exc}") from None
    print(f"model: {name}")
    if args.compare:
        socs = [s.strip() for s in args.compare.split(",") if s.strip()]
        print("\n".join(compare_lines(blob, socs, mask)))
        return 0
    try:
        report = board_eval.eval_perf(blob, mask, host_times=args.host)
    except RuntimeError as exc:
        raise SystemExit(f"E perf: {exc}") from None
    print(report.table, end="")
    what = "host" if args.host else "estimated board"
    print(f"rknn_run: {report.run_us} us ({what} time, RKNN_QUERY_PERF_RUN)")
    return 0
