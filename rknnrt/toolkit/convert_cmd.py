"""`rknnrt convert`: the converter from the command line.

Every failure is one `E` line and exit status 1 (never a traceback for a user error); long
steps (calibration, hybrid analysis) print progress on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..model.targets import DEFAULT_PLATFORM
from .rknn import RKNN

LOADERS = {".onnx": "onnx", ".pt": "pytorch", ".pth": "pytorch", ".torchscript": "pytorch",
           ".tflite": "tflite", ".pb": "tensorflow"}  # fmt: skip


def _groups(text: str | None, what: str, cast: type = float) -> list | None:
    """'a,b,c' (one input) or 'a,b,c;d,e,f' (one group per input)."""
    if not text:
        return None
    try:
        return [[cast(v) for v in group.split(",")] for group in text.split(";")]
    except ValueError:
        raise SystemExit(f"E convert: {what} {text!r}: expected numbers like 1,2,3 "
                         "or 1,2;3,4") from None


def _shape_sets(text: str | None) -> list | None:
    """'1,3,224,224;1,3,320,320' (one set per ';'); inputs of one set separated by '+'."""
    if not text:
        return None
    sets = []
    for one in text.split(";"):
        shapes = [_groups(shape, "--dynamic-input", int) for shape in one.split("+")]
        if not all(shapes):
            raise SystemExit(f"E convert: --dynamic-input {text!r}: every shape set needs its "
                             "dims, e.g. 1,3,224,224;1,3,320,320")  # fmt: skip
        sets.append([shape[0] for shape in shapes])  # type: ignore[index]
    return sets


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert a model (ONNX, TorchScript, TFLite) to rknnrt")
    p.add_argument("model", help="model file: .onnx, .pt (TorchScript, needs --input-size), "
                   ".tflite, .pb (needs --inputs/--outputs/--input-size)")  # fmt: skip
    p.add_argument("-o", "--output", help="output file (default: MODEL.rknnrt)")
    p.add_argument("--target", default=DEFAULT_PLATFORM,
                   help=f"target platform (default {DEFAULT_PLATFORM})")  # fmt: skip
    p.add_argument("--mean", help="mean per channel: 123.675,116.28,103.53 (';' between inputs)")
    p.add_argument("--std", help="std per channel: 58.395,57.12,57.375 (';' between inputs)")
    p.add_argument("--custom-string", help="string returned by RKNN_QUERY_CUSTOM_STRING")
    p.add_argument("--float-dtype", default="float16", choices=["float16", "float32"],
                   help="unquantised models: float16 as on the NPU (default) or exact float32")
    p.add_argument("--dataset", help="quantise to int8, calibrating on this dataset file (one "
                   "line per sample: image files or .npy paths, one per input)")  # fmt: skip
    p.add_argument("--algorithm", default="normal", choices=["normal", "mmse", "kl_divergence"],
                   help="quantisation algorithm")  # fmt: skip
    p.add_argument("--method", default="channel", choices=["channel", "layer"],
                   help="weight quantisation: per channel (default) or per layer")
    p.add_argument("--hybrid-level", type=int, default=0, metavar="N",
                   help="automatic hybrid quantisation: keep in float16 the layers below "
                   "--hybrid-cos (N > 0 turns it on)")  # fmt: skip
    p.add_argument("--hybrid-cos", type=float, default=0.98,
                   help="cosine threshold of --hybrid-level (default 0.98)")
    p.add_argument("--rgb2bgr", action="store_true", help="dataset images fed as BGR")
    p.add_argument("--dynamic-input", help="input shape sets, NCHW: '1,3,224,224;1,3,320,320' "
                   "('+' between the inputs of one set)")  # fmt: skip
    p.add_argument("--input-size", help="input sizes for .pt/.pb models: 1,3,224,224 "
                   "(';' between inputs)")  # fmt: skip
    p.add_argument("--inputs", help=".pb models: input node names, comma-separated")
    p.add_argument("--outputs", help=".pb models: output node names, comma-separated")
    p.add_argument("--batch", type=int, help="rknn_batch_size")
    p.set_defaults(func=run)


def _step(name: str, call) -> None:  # noqa: ANN001 - a zero-argument RKNN call
    start = time.perf_counter()
    sys.stderr.write(f"I {name} ...\n")
    if call() != 0:
        raise SystemExit(1)  # the RKNN method printed its E line
    elapsed = time.perf_counter() - start
    if elapsed > 1:
        sys.stderr.write(f"I {name} done ({elapsed:.1f} s)\n")


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            sys.stderr.write(exc.code + "\n")
            return 1
        return int(exc.code or 0)


def _run(args: argparse.Namespace) -> int:
    kind = LOADERS.get(os.path.splitext(args.model)[1].lower())
    if kind is None:
        raise SystemExit(f"E convert: {args.model!r}: unknown model type (expected "
                         f"{', '.join(sorted(LOADERS))})")  # fmt: skip
    if not os.path.isfile(args.model):
        raise SystemExit(f"E convert: {args.model!r}: no such file")
    if args.dataset is not None and not os.path.isfile(args.dataset):
        raise SystemExit(f"E convert: dataset {args.dataset!r}: no such file")
    sizes = _groups(args.input_size, "--input-size", int)
    rknn = RKNN()
    _step("config", lambda: rknn.config(
        mean_values=_groups(args.mean, "--mean"), std_values=_groups(args.std, "--std"),
        target_platform=args.target, custom_string=args.custom_string,
        float_dtype=args.float_dtype, quantized_algorithm=args.algorithm,
        quantized_method=args.method, quantized_hybrid_level=args.hybrid_level,
        auto_hybrid_cos_thresh=args.hybrid_cos, quant_img_RGB2BGR=args.rgb2bgr,
        dynamic_input=_shape_sets(args.dynamic_input),
    ))  # fmt: skip
    loads = {
        "onnx": lambda: rknn.load_onnx(args.model),
        "pytorch": lambda: rknn.load_pytorch(args.model, sizes),
        "tflite": lambda: rknn.load_tflite(args.model),
        "tensorflow": lambda: rknn.load_tensorflow(
            args.model, (args.inputs or "").split(",") if args.inputs else None, sizes,
            (args.outputs or "").split(",") if args.outputs else None),
    }  # fmt: skip
    _step(f"loading {args.model}", loads[kind])
    _step("building", lambda: rknn.build(
        do_quantization=args.dataset is not None, dataset=args.dataset,
        rknn_batch_size=args.batch, auto_hybrid=args.hybrid_level > 0))  # fmt: skip
    out = args.output or os.path.splitext(args.model)[0] + ".rknnrt"
    _step(f"writing {out}", lambda: rknn.export_rknn(out))
    print(f"wrote {out} ({len(rknn.model_bytes())} bytes, target {args.target})")
    return 0
