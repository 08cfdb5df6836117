"""Per-layer agreement of a float16 vendor fixture with the vendor's simulator: each op of the
rebuilt program fed the simulator's own values of its inputs (fixtures_arch/layers16, made by
tools/vendor_diff/arch_layers.py --fp16 in the vendor's environment). A fused ConvAdd rounds
its convolution to float16 before the Add, as the simulator does (it runs Conv and Add as two
ops); rounding once, 471 of its 4096 outputs were one float16 step off."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import utils

from rknnrt.model.vendor_rknn import fileformat, rebuild
from rknnrt.model.vendor_rknn.fileformat import CONST_KINDS

ARCH = Path(__file__).parent / "fixtures_arch"
STEM = "mbv2_rk3588_fp16"


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
        srcs = [m.tensors[i] for i in n.inputs if m.tensors[i].kind not in CONST_KINDS]
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


@pytest.fixture(scope="module")
def rows() -> dict[str, tuple[str, int, int]]:
    return _per_op(STEM)


def test_every_op_is_compared(rows) -> None:
    """(The output's Reshape reads a helper tensor the simulator has no value of.)"""
    assert sorted(op for op, _, _ in rows.values()) == ["Conv"] * 3 + ["ConvAdd"] + \
        ["ConvClip"] * 4  # fmt: skip


def test_the_fused_add_rounds_its_convolution_first(rows) -> None:
    op, differ, size = rows["add22"]
    assert op == "ConvAdd" and size == 4096 and differ == 0


def test_every_other_op_differs_at_most_at_a_few_rounding_ties(rows) -> None:
    """(The simulator's convolutions sum in their own order: a value at a float16 rounding
    midpoint may fall on the other side: 4 of clip6's 4096, 1 of clip18's 12288.)"""
    for name, (op, differ, size) in rows.items():
        assert differ <= max(1, size // 1000), (name, op, differ, size)
