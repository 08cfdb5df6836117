"""Fold an inference `BatchNormalization` into the constant-weight `Conv` that feeds it."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import numpy_helper

from rknnrt.toolkit.passes import _graph


def inference_form(bn: onnx.NodeProto, inits: dict) -> bool:
    """A BatchNormalization in constant inference form: constant parameters, no training-mode
    outputs, per-channel statistics."""
    if bn.op_type != "BatchNormalization" or bn.domain not in _graph.DEFAULT_DOMAINS:
        return False
    if len(bn.input) != 5 or any(name not in inits for name in bn.input[1:]):
        return False
    if any(bn.output[1:]):  # training-mode running statistics are requested
        return False
    # spatial=0 (opset < 9) normalizes per activation, not per channel.
    return not _graph.attr(bn, "training_mode", 0) and _graph.attr(bn, "spatial", 1) != 0


def scale_and_terms(bn: onnx.NodeProto, inits: dict) -> tuple[np.ndarray, ...]:
    """(s, bias, mean) in float64 of an inference-form BN: BN(x) = (x - mean) * s + bias with
    s = scale / sqrt(var + eps)."""
    scale, bias, mean, var = (
        numpy_helper.to_array(inits[n]).astype(np.float64) for n in bn.input[1:]
    )
    return scale / np.sqrt(var + _graph.attr(bn, "epsilon", 1e-5)), bias, mean


def _fusable(conv, bn, inits: dict, outputs: set[str], uses: Counter) -> bool:
    """Conv has constant W/B and feeds only this BN; BN is in constant inference form."""
    if conv is None or conv.op_type != "Conv" or conv.domain not in _graph.DEFAULT_DOMAINS:
        return False
    bias = conv.input[2] if len(conv.input) > 2 else ""
    if conv.input[1] not in inits or (bias and bias not in inits):
        return False
    if conv.output[0] in outputs or uses[conv.output[0]] != 1:
        return False
    return inference_form(bn, inits)


def _fold(conv, bn, inits: dict) -> tuple[np.ndarray, np.ndarray]:
    """W' = W * s, B' = (B - mean) * s + bias with s = scale / sqrt(var + eps): in float32 for
    float32 weights (else float64).

    Vendor rule: the vendor folds in float32, which moves a folded weight by a float32 rounding
    and so decides its int8 rounding where it lies near a .5 tie. Measured with the simulator's
    dumps (each op computed from the simulator's own inputs; elements that differ although
    rknnrt's exact value is more than 0.02 steps from a tie, i.e. a weight differs), float64
    folding -> this, both with rules.quantize_weight's float32 division: ResNet-50 83 -> 0,
    ShuffleNet 9 -> 0, Inception v1 0 -> 0; (W * scale) / sqrt(var + eps) left 21 and 7."""
    w = numpy_helper.to_array(inits[conv.input[1]])
    has_b = len(conv.input) > 2 and conv.input[2]
    b = numpy_helper.to_array(inits[conv.input[2]]) if has_b else np.zeros(w.shape[0], w.dtype)
    per_channel = (-1, *[1] * (w.ndim - 1))  # output channels: W's axis 0 for every group count
    if w.dtype == np.float32:
        scale, bias, mean, var = (numpy_helper.to_array(inits[n]).astype(np.float32)
                                  for n in bn.input[1:])  # fmt: skip
        s = scale / np.sqrt(var + np.float32(_graph.attr(bn, "epsilon", 1e-5)))
        return w * s.reshape(per_channel), ((b.astype(np.float32) - mean) * s + bias)
    s, bias, mean = scale_and_terms(bn, inits)
    w2 = w.astype(np.float64) * s.reshape(per_channel)
    b2 = (b.astype(np.float64) - mean) * s + bias
    return w2.astype(w.dtype), b2.astype(w.dtype)


def run(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return a copy of `model` with every Conv -> BatchNormalization pair fused into a Conv."""
    model = _graph.copy(model)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    outputs = {o.name for o in graph.output}
    uses = Counter(name for node in graph.node for name in _graph.node_inputs(node))
    producers = {name: node for node in graph.node for name in node.output}
    taken = _graph.all_names(graph)
    removed, new_inits = set(), []
    for idx, bn in enumerate(graph.node):
        if bn.op_type != "BatchNormalization" or bn.domain not in _graph.DEFAULT_DOMAINS:
            continue
        conv = producers.get(bn.input[0])
        if not _fusable(conv, bn, inits, outputs, uses):
            continue
        w, b = _fold(conv, bn, inits)
        # Fresh names: the old W/B may be shared with other nodes.
        w_name = _graph.unique_name(taken, f"{bn.output[0]}_W")
        b_name = _graph.unique_name(taken, f"{bn.output[0]}_B")
        new_inits += [numpy_helper.from_array(w, w_name), numpy_helper.from_array(b, b_name)]
        del conv.input[1:]
        conv.input.extend([w_name, b_name])
        _graph.remove_where(graph.value_info, lambda _, v, old=conv.output[0]: v.name == old)
        conv.output[0] = bn.output[0]  # consumers of the BN keep reading the same name
        removed.add(idx)
    _graph.remove_where(graph.node, lambda i, _: i in removed)
    graph.initializer.extend(new_inits)
    _graph.drop_unused_initializers(graph)
    return model
