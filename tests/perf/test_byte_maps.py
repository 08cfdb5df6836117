"""core/program/byte_maps.py and the kernels `rknnrt.kernels::ByteMap_<x><y>`: an int8 program's
per-tensor requantisation DequantizeLinear -> QuantizeLinear (and the Transpose to NHWC after
it) as one table pass, bit-identical to onnxruntime's nodes."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.core import switches
from rknnrt.core.program import byte_maps, whole
from tests.perf.conftest import (
    assert_switch_and_missing_compiler_keep,
    every_byte,
    int8_network,
    one_input_model,
    outputs_on_and_off,
    programs_opened,
)

_U8, _S8 = TensorProto.UINT8, TensorProto.INT8
_NP = {_U8: np.uint8, _S8: np.int8}


def _requant(x_type: int, y_type: int, dims: list[int], x_scale: float, x_zp: int,
             y_scale: float, y_zp: int, nhwc: bool,
             extra_reader: bool = False) -> bytes:  # fmt: skip
    """x -> DequantizeLinear -> QuantizeLinear [-> Transpose(0, 2, 3, 1)] -> y (and the
    dequantised tensor as a second output with `extra_reader`)."""
    inits = [numpy_helper.from_array(v, n) for v, n in (
        (np.array(x_scale, np.float32), "xs"), (np.array(x_zp, _NP[x_type]), "xz"),
        (np.array(y_scale, np.float32), "ys"), (np.array(y_zp, _NP[y_type]), "yz"))]  # fmt: skip
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["d"]),
             helper.make_node("QuantizeLinear", ["d", "ys", "yz"], ["q" if nhwc else "y"])]
    if nhwc:
        nodes.append(helper.make_node("Transpose", ["q"], ["y"], perm=[0, 2, 3, 1]))
    outputs = [helper.make_tensor_value_info("y", y_type, None)]
    if extra_reader:
        outputs.append(helper.make_tensor_value_info("d", TensorProto.FLOAT, None))
    return one_input_model(nodes, x_type, dims, outputs, inits)


def _onnxruntime(graph: bytes, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(graph, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("x_type, y_type", [(_S8, _U8), (_U8, _U8), (_U8, _S8), (_S8, _S8)])
@pytest.mark.parametrize("params", [(0.02, 5, 0.02, 133), (0.3, -7, 0.011, 250),
                                    (1e-3, 17, 0.5, 128), (0.0417, 0, 0.0396, 3)])  # fmt: skip
def test_the_table_is_what_the_two_nodes_compute(x_type, y_type, params) -> None:
    """Over all 256 input bytes: the same scale with the zero point moved, saturating at both
    ends, a handful of levels, and two scales that round at many half steps."""
    xs, xz, ys, yz = params
    xz = xz if x_type == _S8 else xz + 128
    yz = yz - 128 if y_type == _S8 else yz
    graph = _requant(x_type, y_type, [256], xs, xz, ys, yz, nhwc=False)
    x = np.arange(256, dtype=np.uint8).view(_NP[x_type])
    want = _onnxruntime(graph, x).view(np.uint8)
    assert byte_maps.table(x_type, xs, xz, y_type, ys, yz).tobytes() == want.tobytes()


def _has_vnni(library) -> bool:
    return bool(library[1].rknnrt_qconv_vnni())


@pytest.mark.parametrize("dims, same_scale", [([1, 3, 7, 23], True), ([1, 3, 7, 23], False),
                                              ([2, 3, 16, 16], True), ([1, 5, 6, 9], False),
                                              ([1, 1, 5, 40], False)])  # fmt: skip
def test_the_kernel_gives_the_nodes_bytes(library, dims, same_scale) -> None:
    """An int8 input requantised to uint8 and laid out NHWC (an int8 program's first nodes): 3
    channels (the interleaved path, both with a table that only moves the zero point and with
    a general one; pixel counts that are and are not multiples of 16), other channel counts
    (table reads), one channel (NCHW and NHWC the same bytes)."""
    params = (0.02, -3, 0.02, 125) if same_scale else (0.02, -3, 0.013, 120)
    graph = _requant(_S8, _U8, dims, *params, nhwc=True)
    x = every_byte(np.int8, dims)
    rewritten, unused = byte_maps.rewrite(graph, {})
    assert not unused
    ops = [n.op_type for n in onnx.load_model_from_string(rewritten).graph.node]
    assert ops == ["ByteMap_s8u8"]
    want = _onnxruntime(graph, x)
    got = whole.open_program(rewritten, optimise=False).run(None, {"x": x})[0]
    assert got.shape == want.shape and got.dtype == np.uint8
    assert got.tobytes() == want.tobytes()
    assert len(np.unique(want)) > 100


def test_requantisations_outside_its_conditions_stay(library) -> None:
    """The dequantised tensor read elsewhere, a zero scale, a Transpose to another layout, no
    Transpose at all (onnxruntime moves its own layout Transposes through the pair to the
    input, which a table node would stop: SqueezeNet int8 ran 2.5x slower): onnxruntime's
    nodes run."""
    for graph in (
        _requant(_S8, _U8, [1, 3, 4, 4], 0.02, 0, 0.02, 128, nhwc=True, extra_reader=True),
        _requant(_S8, _U8, [1, 3, 4, 4], 0.0, 0, 0.02, 128, nhwc=True),
        _requant(_S8, _U8, [1, 3, 4, 4], 0.02, 0, 0.02, 128, nhwc=False),
    ):
        assert byte_maps.rewrite(graph, {})[0] is graph
    model = onnx.load_model_from_string(_requant(_S8, _U8, [1, 3, 4, 5], 0.02, 0, 0.02, 128,
                                                 nhwc=True))  # fmt: skip
    model.graph.node[2].attribute[0].CopyFrom(helper.make_attribute("perm", [0, 1, 3, 2]))
    graph = model.SerializeToString()
    assert byte_maps.rewrite(graph, {})[0] is graph


def test_the_switch_and_a_missing_compiler_keep_the_nodes(monkeypatch, tmp_path, capsys) -> None:
    graph = _requant(_S8, _U8, [1, 3, 4, 4], 0.02, 0, 0.02, 128, nhwc=True)
    assert_switch_and_missing_compiler_keep(monkeypatch, tmp_path, capsys,
                                            switches.INT8_BYTE_MAP_KERNEL, byte_maps.rewrite, graph)


def test_an_int8_networks_input_is_one_table_pass(library, tmp_path, monkeypatch) -> None:
    """MobileNetV3-small int8 (its stem on the NHWC conv kernel where the CPU has VNNI): the
    program's int8 input reaches uint8 through one ByteMap node, and the outputs are the same
    bytes as with onnxruntime's DequantizeLinear, QuantizeLinear and Transpose."""
    if not _has_vnni(library):
        pytest.skip("this CPU has no AVX-512 VNNI: the stem stays a float conv in NCHW, no "
                    "Transpose follows the input (test_the_kernel_gives_the_nodes_bytes covers "
                    "the op)")
    path, rng = int8_network("mobilenetv3_small", tmp_path)
    seen = programs_opened(monkeypatch)
    x = rng.rand(1, 3, 64, 64).astype(np.float32)
    outs = outputs_on_and_off(monkeypatch, switches.INT8_BYTE_MAP_KERNEL, path, [x])
    on_ops, off_ops = seen
    assert on_ops.count("ByteMap_s8u8") == 1 and "ByteMap_s8u8" not in off_ops
    assert len(off_ops) - len(on_ops) >= 1
    assert outs["1"][0].tobytes() == outs["0"][0].tobytes()
