"""The vendor's int8 rules, each in one place with the measurement that justified it
(rknn-toolkit2 2.5.0, rk3588, 'normal'/'channel', re-drawn light models; issue 15 and
docs/quantization.md). rknnrt's earlier choices stay available only as named options.
"""

from __future__ import annotations

import numpy as np

from ...model import numerics
from .calibrate import asymmetric


def weight_qparams(
    w: np.ndarray, axis: int, per_channel: bool, symmetric: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(scale, zero point) of a weight tensor, one per output channel (or one in all).

    Vendor rule (issue 15, cause 1): weights are quantised ASYMMETRICALLY like activations,
    scale = (max - min) / 255 and zp = -128 - round(min / scale) over each channel's range
    widened to hold 0. Evidence: patching this alone into rknnrt raised rknnrt-vs-vendor
    cosine from 0.991/0.988/0.967/0.962 to 0.9995/0.997/0.979/0.984 (SqueezeNet, Inception v1,
    ShuffleNet, ResNet-50) and reproduced SqueezeNet's first conv exactly.
    `symmetric=True`: rknnrt's former choice, +-127 with zp 0 (an explicit option)."""
    if per_channel:
        other = tuple(d for d in range(w.ndim) if d != axis)
        lo, hi = np.min(w, axis=other), np.max(w, axis=other)
    else:
        lo, hi = np.array([w.min()]), np.array([w.max()])
    if symmetric:
        scale = np.maximum(np.abs(lo), np.abs(hi)) / 127.0
        scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
        return scale, np.zeros(scale.shape, np.int8)
    params = [asymmetric(a, b) for a, b in zip(lo, hi)]
    scale = np.array([p.scale for p in params], np.float32)
    zp = np.array([p.zp for p in params], np.int8)
    return scale, zp


def quantize_weight(w: np.ndarray, scale: np.ndarray, zp: np.ndarray, axis: int) -> np.ndarray:
    """round(w / scale) + zp, the division in float32 (scale as stored, float32).

    Vendor rule: the simulator divides in float32, which decides the weights lying within a
    float32 rounding of a .5 tie (a few per million). Measured with the simulator's dumps (each
    op computed from the simulator's own inputs; elements that differ although rknnrt's exact
    value is more than 0.02 steps from a tie, i.e. a weight differs), float64 division -> this,
    both after passes.fold_batchnorm's float32 folding: ResNet-50 73 -> 0, ShuffleNet 57 -> 0,
    Inception v1 (no BatchNorm) 52 -> 0. The vendor's exported `.rknn` rounds some such ties
    its own way: it differs from these weights in 22 of ResNet-50's 13.5 M (25 before) and 13
    of Inception v1's 6.0 M (14), so the simulator, not the file, is the reference here."""
    shape = [1] * w.ndim
    shape[axis] = -1
    return numerics.quantize(w, scale.reshape(shape), zp.reshape(shape),
                             division=numerics.FLOAT32_DIVISION)  # fmt: skip


# Vendor rule: a tensor read only by Sigmoid is calibrated within [-7, 7]. Measured
# (tools/vendor_diff): a conv output spanning about +-15 before a Sigmoid got scale 0.054902
# = 14/255, zp 0; ocr_det_like's final conv (range -2.2..10.5) got -2.2..7.0 (0.0360983/-67).
SIGMOID_INPUT_RANGE = (-7.0, 7.0)


def calibration_bounds(graph) -> dict[str, tuple[float, float]]:
    """Per-tensor clipping of the calibrated range the vendor applies."""
    readers: dict[str, set[str]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, set()).add(node.op_type)
    outputs = {o.name for o in graph.output}
    bounds = {name: SIGMOID_INPUT_RANGE for name, ops in readers.items()
              if ops == {"Sigmoid"} and name not in outputs}  # fmt: skip
    bounds.update((name, (0.0, np.inf)) for name in _clipped_concat_inputs(graph))
    return bounds


def concat_before_relu(graph, qparams: dict) -> None:
    """Vendor rule (issue 15 cause 4): a Concat read only by a Relu takes the Relu output's
    parameters, and each input that is a Conv output read only by that Concat has its own
    range clipped at 0 (the Relu moves before the Concat into the conv). Measured on
    ShuffleNet (re-drawn weights, tools/vendor_diff): Concat r161 = Relu r162 = 0.0298664/-128
    and its conv input r159 0.0223866/-128 (its own max, min 0), where rknnrt had 0.0420/-9;
    Concat r15 and its conv input r13 (which holds the max) both 0.0224105/-128."""
    readers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    for node in graph.node:
        if node.op_type != "Concat":
            continue
        users = readers.get(node.output[0], [])
        if len(users) != 1 or users[0].op_type != "Relu" or users[0].output[0] not in qparams:
            continue
        qparams[node.output[0]] = qparams[users[0].output[0]]


def _clipped_concat_inputs(graph) -> list[str]:
    """Conv outputs read only by a Concat that is read only by a Relu (concat_before_relu)."""
    producers = {out: node for node in graph.node for out in node.output}
    readers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    names = []
    for node in graph.node:
        users = readers.get(node.output[0], []) if node.op_type == "Concat" else []
        if len(users) == 1 and users[0].op_type == "Relu":
            names += [n for n in node.input if n in producers
                      and producers[n].op_type == "Conv" and len(readers[n]) == 1]  # fmt: skip
    return names
