"""Per-layer agreement of float16 vendor fixtures with the vendor's simulator: each op of the
rebuilt program fed the simulator's own values of its inputs (fixtures_arch/layers16, made by
tools/vendor_diff/arch_layers.py --fp16 in the vendor's environment). A fused op rounds its
convolution to float16 before a step other than Relu or Clip (an Add, a Mul, SiLU, HardSwish,
GELU, Sigmoid), as the simulator does: it runs the convolution and the step as two ops; an
exNorm is onnxruntime's LayerNormalization on float16 tensors, as the simulator's is (as
float32 pieces, 18 and 36 of the transformer's 384 were off)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import utils

from rknnrt.model.vendor_rknn import fileformat, rebuild
from rknnrt.model.vendor_rknn.fileformat import CONST_KINDS
from rknnrt.model.vendor_rknn.graph import is_helper

ARCH = Path(__file__).parent / "fixtures_arch"
# rk3588 float16 fixtures with the simulator's tensors (arch_layers.py --fp16), and the number
# of ops compared (an op reading a helper tensor the simulator has no value of is not)
STEMS = {"mbv2_rk3588_fp16": 9, "yoloneck_rk3588_fp16": 11, "effnet_rk3588_fp16": 11,
         "mbv3_rk3588_fp16": 10, "transformer_rk3588_fp16": 17}  # fmt: skip


def _per_op(stem: str) -> dict[str, tuple[str, int, int]]:
    """Output tensor -> (op type, elements differing from the simulator, elements)."""
    m = fileformat.parse(memoryview((ARCH / f"{stem}.rknn").read_bytes()))
    b, _, _ = rebuild.rebuild(m)
    for tensor, array in b.external:  # (the weights inline: one in-memory model)
        tensor.raw_data = array.tobytes()
    model = onnx.shape_inference.infer_shapes(b.model)
    with np.load(ARCH / "layers16" / f"{stem}.npz", allow_pickle=False) as data:
        sim = {k[2:]: data[k].astype(np.float32) for k in data.files}
    rows = {}
    for n in m.nodes:
        srcs = [m.tensors[i] for i in n.inputs
                if m.tensors[i].kind not in CONST_KINDS and not is_helper(m.tensors[i])]
        outs = [m.tensors[i] for i in n.outputs]
        if not srcs or len(outs) != 1 or any(t.name not in sim for t in [*srcs, *outs]):
            continue
        names = [b.values[t.index] for t in srcs]
        sub = utils.Extractor(model).extract_model(names, [b.values[outs[0].index]])
        session = ort.InferenceSession(sub.SerializeToString(),
                                       providers=["CPUExecutionProvider"])  # fmt: skip
        feed = {v: sim[t.name].reshape(t.shape) for v, t in zip(names, srcs)}
        got = session.run(None, feed)[0].ravel()
        want = sim[outs[0].name].ravel()
        rows[outs[0].name] = (n.op_type, int((got != want).sum()), want.size)
    return rows


@pytest.mark.parametrize("stem", sorted(STEMS))
def test_every_op_equals_the_simulator_but_at_a_few_rounding_ties(stem: str) -> None:
    """(The simulator's convolutions sum in their own order: a value at a float16 rounding
    midpoint may fall on the other side: at most 4 of an op's 4096 outputs here.) Rounding a
    fused step's input once with the step, a ConvAdd was 471 of 4096 off, a ConvExSwish 986 of
    4096, a ConvHardSwish 1004 of 4096, a ConvExGelu 212 of 768."""
    rows = _per_op(stem)
    assert len(rows) == STEMS[stem]
    for name, (op, differ, size) in rows.items():
        assert differ <= max(1, size // 1000), (stem, name, op, differ, size)


def test_the_fused_steps_are_compared() -> None:
    ops = {op for stem in ("mbv2_rk3588_fp16", "yoloneck_rk3588_fp16", "mbv3_rk3588_fp16",
                           "transformer_rk3588_fp16") for op, _, _ in _per_op(stem).values()}
    assert {"ConvAdd", "ConvExSwish", "ConvHardSwish", "ConvExGelu", "ConvClip"} <= ops
