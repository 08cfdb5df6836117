"""The `rknnrt eval` and `rknnrt sweep` subcommands (cli.py only registers them)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..model import files
from .data import DatasetError, list_samples
from .evaluate import add_drift, evaluate
from .metrics import load_metric
from .runner import EvaluationError
from .sweep import RANKINGS, GridError, load_grid, sweep


def _floats(text: str | None) -> list[list[float]] | None:
    if not text:
        return None
    return [[float(v) for v in group.split(",")] for group in text.split(";")]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data",
        required=True,
        help="folder of images/.npy files, or a list file (one sample per line)",
    )
    p.add_argument(
        "--labels",
        help="labels file: '<sample file name> <class index>' per line "
        "(adds classification accuracy)",
    )
    p.add_argument(
        "--metric",
        action="append",
        default=[],
        help="'accuracy' or 'module:factory' returning a metric object (repeatable)",
    )
    p.add_argument("--limit", type=int, help="evaluate only the first N samples")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes (or Ray actors) evaluating in parallel (default 1)",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run on Ray (pip install 'rknnrt[cluster]'); no address: a local cluster",
    )
    p.add_argument("--json", metavar="FILE", help="write the report as JSON ('-': stdout)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("eval", help="evaluate a converted model on a dataset (vs the float model)")
    p.add_argument("model", help="converted model file (.rknnrt, or a vendor .rknn)")
    _common(p)
    p.add_argument("--reference", help="the float ONNX model: cosine, max-abs and agreement")
    p.add_argument("--mean", help="reference mean per channel (default: the model's)")
    p.add_argument("--std", help="reference std per channel (default: the model's)")
    p.add_argument(
        "--calib",
        help="per-layer drift on the worst samples: the calibration set "
        "the model was quantised with (needs --reference)",
    )
    p.add_argument("--algorithm", default="normal", help="drift: the quantisation algorithm")
    p.add_argument(
        "--method",
        default="channel",
        choices=["channel", "layer"],
        help="drift: the quantisation method",
    )
    p.add_argument("--plot", metavar="PNG", help="cosine histograms (needs matplotlib)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("sweep", help="convert with every configuration of a grid, evaluate, rank")
    p.add_argument("model", help="ONNX model")
    _common(p)
    p.add_argument("--calib", help="calibration set (folder or list file) for int8 configs")
    p.add_argument(
        "--config-grid",
        required=True,
        help="grid file, JSON (or YAML with PyYAML): key -> list of values",
    )
    p.add_argument("--mean", help="mean values per channel, e.g. 123.675,116.28,103.53")
    p.add_argument("--std", help="std values per channel, e.g. 58.395,57.12,57.375")
    p.add_argument("--rank-by", default="cosine", choices=sorted(RANKINGS))
    p.set_defaults(func=cmd_sweep)


def _emit(payload: Any, target: str | None) -> None:
    if target is None:
        return
    text = json.dumps(payload, indent=2)
    if target == "-":
        print(text)
    else:
        files.write_atomic(target, text + "\n")


def cmd_eval(args: argparse.Namespace) -> int:
    try:
        metrics = [load_metric(m) for m in args.metric]
        samples = list_samples(args.data, args.labels, args.limit)
        result = evaluate(
            args.model,
            samples,
            reference=args.reference,
            labels=args.labels,
            metrics=metrics,
            workers=args.workers,
            ray=args.ray is not None,
            ray_address=args.ray or None,
            mean=_floats(args.mean),
            std=_floats(args.std),
            progress=not args.quiet,
        )
        if args.calib:
            if not args.reference:
                raise SystemExit("E eval: --calib (per-layer drift) needs --reference")
            add_drift(
                result,
                args.model,
                args.reference,
                args.calib,
                samples,
                args.algorithm,
                args.method == "channel",
                _floats(args.mean),
                _floats(args.std),
            )
    except (DatasetError, EvaluationError, ValueError, RuntimeError, OSError) as exc:
        raise SystemExit(f"E eval: {exc}") from None
    except Exception as exc:  # a worker's error re-raised by the pool or Ray, wrapped
        raise SystemExit(f"E eval: {type(exc).__name__}: {exc}") from None
    if args.json != "-":
        print(result.table())
    _emit(result.report, args.json)
    if args.plot and not result.plot(args.plot):
        sys.stderr.write("no plot: matplotlib is not installed or there is no --reference\n")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    try:
        configs = load_grid(args.config_grid)
        metrics = [load_metric(m) for m in args.metric]
        entries = sweep(
            args.model,
            args.data,
            configs,
            calib=args.calib,
            mean=_floats(args.mean),
            std=_floats(args.std),
            labels=args.labels,
            metrics=metrics,
            rank_by=args.rank_by,
            limit=args.limit,
            workers=args.workers,
            ray=args.ray is not None,
            ray_address=args.ray or None,
            progress=not args.quiet,
        )
    except (GridError, DatasetError, ValueError, RuntimeError, OSError) as exc:
        raise SystemExit(f"E sweep: {exc}") from None
    except Exception as exc:  # a worker's error re-raised by the pool or Ray, wrapped
        raise SystemExit(f"E sweep: {type(exc).__name__}: {exc}") from None
    if args.json != "-":
        print(f"{'rank':>4}  {args.rank_by:>10}  {'seconds':>7}  configuration")
        for k, e in enumerate(entries, 1):
            value = f"{e['score']:.6f}" if e.get("score") is not None else "-"
            note = "" if e["status"] == "ok" else f"  FAILED: {e['error']}"
            print(
                f"{k if e['status'] == 'ok' else '-':>4}  {value:>10}  {e['seconds']:>7.1f}  "
                f"{e['name']}{note}"
            )
    _emit(entries, args.json)
    return 0
