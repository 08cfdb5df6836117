"""toolkit/quantize/fp16.py: stored tensors that are float16 already are not rounded again,
and the program's outputs stay bit-identical to rounding every stored tensor."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

from rknnrt.toolkit.quantize import fp16
from tools.real_arch import dense

from .models import shufflenet_like, value_moving_model


def _outputs(program: onnx.ModelProto, inputs: list[np.ndarray]) -> list[bytes]:
    session = ort.InferenceSession(program.SerializeToString(), providers=["CPUExecutionProvider"])
    return [session.run(None, {"x": x})[0].tobytes() for x in inputs]


def _rounded(program: onnx.ModelProto) -> set[str]:
    """The tensors the program rounds with a Cast pair (their producers' original names)."""
    return {n.input[0][: -len("__f")] for n in program.graph.node
            if n.op_type == "Cast" and n.input[0].endswith("__f")}  # fmt: skip


def test_rounding_skips_only_float16_values_and_changes_no_bit(monkeypatch) -> None:
    for model in (value_moving_model(), shufflenet_like()):
        program = fp16.emulate_fp16(model)
        with monkeypatch.context() as patch:
            patch.setattr(fp16, "already_half", lambda model, stored: set())
            every = fp16.emulate_fp16(model)  # the former program: every stored tensor rounded
        rng = np.random.RandomState(5)
        inputs = [(rng.rand(1, 3, 8, 8) * 4 - 1).astype(np.float16) for _ in range(6)]
        assert _outputs(program, inputs) == _outputs(every, inputs)
        produced = {n.output[0]: n.op_type for n in model.graph.node}
        skipped = _rounded(every) - _rounded(program)
        assert skipped and {produced[t] for t in skipped} <= fp16.VALUE_PRESERVING
        assert all(produced[t] in ("Conv", "AveragePool", "Relu", "Add", "MatMul")
                   for t in _rounded(program))  # fmt: skip
    moving = value_moving_model()
    produced = {n.output[0]: n.op_type for n in moving.graph.node}
    program = fp16.emulate_fp16(moving)
    stored = set(fp16.stored_tensors(moving.graph))
    skipped = {t for t in produced if t not in _rounded(program)} & stored
    kinds = {produced[t] for t in skipped}
    # moved values (MaxPool, Concat, Relu of those, Reshape, Transpose, Slice, Flatten) are
    # not rounded again, whichever of them are stored tensors
    assert {"MaxPool", "Concat"} <= kinds <= fp16.VALUE_PRESERVING
    assert "t6_averagepool" in stored and "t6_averagepool" in _rounded(program)  # computes

def test_relu_of_a_computed_value_is_still_rounded() -> None:
    model = value_moving_model()
    rounded = _rounded(fp16.emulate_fp16(model))
    relu_of_conv = [n.output[0] for n in model.graph.node if n.op_type == "Relu"
                    and n.input[0].endswith("_conv")]  # fmt: skip
    relu_of_moved = [n.output[0] for n in model.graph.node if n.op_type == "Relu"
                     and n.input[0].endswith("_concat")]  # fmt: skip
    assert relu_of_conv and set(relu_of_conv) <= rounded
    assert relu_of_moved and not set(relu_of_moved) & rounded


def test_a_split_layernorm_is_one_op_in_the_fp16_program() -> None:
    """The vendor's fp16 build fuses a LayerNorm exported as pieces (its simulator's outputs
    are bit-identical with the LayerNorm split or whole): the fp16 program stores only its
    output, and computes what the one-op model's program computes, bit for bit."""
    split, whole = (fp16.emulate_fp16(onnx.shape_inference.infer_shapes(
        dense.deit_tiny(32, depth=1, split_layernorm=split))) for split in (True, False))
    ops = [n.op_type for n in split.graph.node]
    assert ops.count("LayerNormalization") == 3 and "ReduceMean" not in ops and "Sqrt" not in ops
    assert len(_rounded(split)) == len(_rounded(whole))  # the same tensors stored
    rng = np.random.RandomState(4)
    for _ in range(3):
        x = rng.rand(1, 3, 32, 32).astype(np.float16)
        feed = {"images": x}
        a = ort.InferenceSession(split.SerializeToString(), providers=["CPUExecutionProvider"])
        b = ort.InferenceSession(whole.SerializeToString(), providers=["CPUExecutionProvider"])
        assert a.run(None, feed)[0].tobytes() == b.run(None, feed)[0].tobytes()
