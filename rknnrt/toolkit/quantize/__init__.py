"""Quantisation as the vendor's toolkit does it: calibrate, choose scales, rewrite the graph.

w8a8: after the vendor's graph rewrites (passes.split_concat_conv, passes.vendor_rewrites),
every tensor the NPU stores (graph.stored_tensors: fused ones are not) gets int8 asymmetric
per-tensor parameters from calibration ('normal' = min/max; 'mmse', 'kl_divergence'); weights
are int8 asymmetric per output channel ('channel') or per tensor ('layer'); biases int32 with
scale s_in * s_w. The rewritten graph is ONNX QDQ (QuantizeLinear/DequantizeLinear around float
ops), which onnxruntime fuses into integer kernels (QLinearConv, QGemm, ...): int32
accumulation and requantisation at each stored tensor, as on the NPU.

fp16: every stored tensor is rounded to float16 (Cast to float16 and back; not again where its
values are float16 already), weights are stored as float16, and the model's inputs and outputs
are float16.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np
import onnx

from ..errors import ConversionError
from ..passes import split_concat_conv, vendor_rewrites
from .calibrate import ALGORITHMS, QParams, _Histogram, _progress, asymmetric, calibrate
from .dataset import at_shape_sets
from .dtypes import QUANTIZED_DTYPES, check_dtype
from .fp16 import emulate_fp16
from .graph import at_least_opset, float_output_tails, float_tensors, stored_tensors, sums_as_adds
from .hybrid import choose_float_layers, rank_layers
from .program import QuantizedProgram
from .qdq import insert_qdq
from .rules import calibration_bounds, concat_before_relu

__all__ = [
    "ALGORITHMS", "QUANTIZED_DTYPES", "QParams", "QuantizedProgram", "_Histogram", "asymmetric",
    "calibrate", "check_dtype", "choose_float_layers", "emulate_fp16",
    "quantize_model", "rank_layers", "stored_tensors",
]  # fmt: skip


def quantize_model(
    model: onnx.ModelProto,
    samples: Sequence[list[np.ndarray]],
    *,
    algorithm: str = "normal",
    per_channel: bool = True,
    float_layers: Collection[str] = (),
    overrides: Mapping[str, tuple[float, int]] | None = None,
    progress: Callable[[int, int], None] = _progress,
    shape_sets: list[list[list[int]]] | None = None,
    symmetric_weights: bool = False,
    split_concat_convs: bool = True,
) -> QuantizedProgram:
    """The one entry point of int8 quantisation: calibrate `model` on `samples` (normalised
    with mean/std, in the model's own layout, one array per graph input) and rewrite it as a
    w8a8 QDQ program.

    `float_layers`: names of nodes to keep in float16 (hybrid quantisation); `overrides`:
    (scale, zp) per tensor name that replace the calibrated ones (hybrid step 2's edited
    parameters); `shape_sets`: config(dynamic_input=...), to calibrate at every shape set
    (dataset.at_shape_sets); `symmetric_weights`: rknnrt's former +-127 weights instead of the
    vendor's asymmetric ones (rules.weight_qparams); `split_concat_convs=False`: keep a
    Conv reading a Concat, and a wide Conv, whole (rknnrt's former graph;
    passes.split_concat_conv) and skip the vendor's other rewrites (passes.vendor_rewrites)."""
    if algorithm not in ALGORITHMS:
        raise ConversionError(f"quantized_algorithm '{algorithm}' is not one of {ALGORITHMS}")
    model = sums_as_adds(at_least_opset(model, 13))  # per-axis QDQ needs opset 13
    if split_concat_convs:
        model = split_concat_conv.run(model, keep=frozenset(float_layers))
        model = split_concat_conv.split_wide_convs(model, keep=frozenset(float_layers))
        for rewrite in vendor_rewrites.ALL:
            model = rewrite(model)
    names = {node.name for node in model.graph.node}
    unknown = sorted(set(float_layers) - names)
    if unknown:
        raise ConversionError(f"float layers {unknown} are not nodes of the model")
    floats = float_tensors(model)
    half = {out for node in model.graph.node if node.name in set(float_layers)
            for out in node.output}  # fmt: skip
    half |= float_output_tails(model.graph)[1]  # a final Softmax's output, wrapped or not
    tensors = [t for t in stored_tensors(model.graph) if t in floats and t not in half]
    if not isinstance(samples, Sequence):  # a generator: calibration takes its length
        samples = list(samples)
    samples = at_shape_sets(samples, shape_sets)
    bounds = calibration_bounds(model.graph)
    qparams = calibrate(model, samples, tensors, algorithm, progress, bounds)
    concat_before_relu(model.graph, qparams)
    for name, (scale, zp) in (overrides or {}).items():
        if name in qparams:
            qparams[name] = QParams(float(scale), int(zp))
    program, io_params, _ = insert_qdq(model, qparams, per_channel, float_layers, symmetric_weights)
    return QuantizedProgram(
        program,
        {name: (qp.scale, qp.zp) for name, qp in io_params.items()},
        {name: (qp.scale, qp.zp) for name, qp in qparams.items()},
        model,
    )
