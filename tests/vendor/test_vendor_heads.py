"""Vendor files of the parts of real networks the architecture blocks do not reach
(tests/vendor/fixtures_heads, built from head_probes.py by make_arch_fixtures.py): a YOLOv5 head
with its decode (grid and anchors folded into NC1HWC2 constants, a Pow, the detections joined
along an axis the file leaves at its default 0), a YOLOv8 head with its DFL decode (its
[144, 1, 1, A] maps split along the default axis 0, the DFL's conv of one output channel) and a
ViT embedding (a class token joined as a constant Concat operand, a position embedding of 17
tokens), on every platform; convs of one output channel, whose weight zero point is a register
on rk3588/rk3566/rk3562 and a named constant on rk3576/rv1126b; DenseNet's standalone
BatchNormalization on inputs whose zero point is not 0 (bnzp). The set's ShuffleNet units (selection
convs, tests/perf/test_selection_convs.py), its attention with values wider than its queries
and keys (YOLO11's PSA) and DeepLabV3's widest atrous convs (Pad, Gather, Pad, Gather around a
dense conv) agree in both dtypes. The YOLOv8 head's int8 decode reads its anchor points and
strides as the file stores them, int8; the simulator computes with the float values the file
does not hold: those three ops alone differ, by one step (fixtures_heads/layers)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from rknnrt.lite import RKNNLite
from rknnrt.model.errors import VendorFormatError
from rknnrt.model.vendor_rknn import fileformat, graph, int8
from tools.vendor_diff import vendor_file

HEADS = Path(__file__).parent / "fixtures_heads"
REPORTED: dict = json.loads((HEADS / "reported.json").read_text())
LAYERS = HEADS / "layers"
FP16 = sorted(s for s in REPORTED if s.endswith("_fp16"))
V8HEAD = sorted(s for s in REPORTED if s.startswith("v8head") and s.endswith("_i8"))
# int8 grouped convs: every op within rounding ties of the simulator (per-layer test below);
# through four convs one of 512 outputs gathers two steps
GROUPED = sorted(s for s in REPORTED if s.startswith("grouped") and s.endswith("_i8"))
INT8 = sorted(s for s in REPORTED if s.endswith("_i8") and s not in V8HEAD + GROUPED)


def test_the_set_covers_every_probe_on_every_platform() -> None:
    assert len(FP16) == 55 and len(V8HEAD) == 5
    assert len(GROUPED) == 5 and len(INT8) == 45
    assert {REPORTED[s]["platform"] for s in FP16} == {"rk3588", "rk3576", "rk3566", "rk3562",
                                                       "rv1126b"}  # fmt: skip


def _rows(stem: str) -> list[tuple[str, float, float]]:
    """Per sample: ('int8', fraction within one step, max steps) or ('float', cosine, 0)."""
    rep = REPORTED[stem]
    with np.load(HEADS / f"{stem}.npz", allow_pickle=False) as data:
        ref = {k: data[k] for k in data.files}
    lite = RKNNLite()
    assert lite.load_rknn(str(HEADS / f"{stem}.rknn")) == 0 and lite.init_runtime() == 0
    rows = []
    name = rep["outputs"][0]
    for s in range(ref["in0"].shape[0]):
        got = np.asarray(lite.inference([ref["in0"][s]], data_format=["nchw"])[0], np.float64)
        want = ref["out0"][s].astype(np.float64)
        assert got.shape == want.shape
        got, want = got.ravel(), want.ravel()
        if rep["dtype_changed"].get(name) == "int8":
            steps = np.abs(got - want) / rep["io_quant"][name]["scale"]
            rows.append(("int8", float(np.mean(steps <= 1 + 1e-3)), float(steps.max())))
        else:
            rows.append(("float", float(got @ want / (np.linalg.norm(got) *
                                                      np.linalg.norm(want))), 0.0))  # fmt: skip
    lite.release()
    return rows


@pytest.mark.parametrize("stem", FP16 + INT8)
def test_heads_agree_with_the_simulator(stem: str) -> None:
    for kind, value, worst in _rows(stem):
        if kind == "int8":
            assert value >= 0.99 and worst <= 1 + 1e-3, (stem, value, worst)
        else:
            assert value >= 0.9999, (stem, value)


@pytest.mark.parametrize("stem", V8HEAD)
def test_the_yolov8_decode_in_int8_is_within_the_simulators_float_constants(stem: str) -> None:
    """Its anchor points and strides differ from the simulator's by their int8 rounding (the
    per-layer test below): >= 99 % of the outputs within one step, none beyond two (the DFL's
    one-channel conv read without its register's zero point: 95.8 % within one step, up to
    255 steps off)."""
    for kind, value, worst in _rows(stem):
        assert kind == "int8" and value >= 0.99 and worst <= 2 + 1e-3, (stem, value, worst)


@pytest.mark.parametrize("stem", GROUPED)
def test_int8_grouped_convs_are_within_compounded_ties(stem: str) -> None:
    for kind, value, worst in _rows(stem):
        assert kind == "int8" and value >= 0.99 and worst <= 2 + 1e-3, (stem, value, worst)


def test_int8_grouped_convs_per_layer_differ_only_at_ties() -> None:
    """(The simulator keeps each grouped conv whole: the compiler's per-group parts are not
    compared, their Concats are.)"""
    buf = (HEADS / "grouped_rk3588_i8.rknn").read_bytes()
    rows = vendor_file.per_layer(buf, vendor_file.load_layers(LAYERS / "grouped_i8.npz"))
    assert len(rows) == 7 and {r.op_type for r in rows} >= {"Concat", "Conv", "ConvRelu"}
    assert all(r.off_tie == 0 and r.max_steps <= 1 for r in rows), rows


# the ops reading the head's int8 constants: elements off ties (measured; a fix lowers them)
CONSTANT_READERS = {"Sub:sub45": 60, "Add:add46": 33, "Mul:div49_2mul": 0, "Mul:mul53": 140}
# rk3576 and rv1126b write the box and class convs feeding each scale's Concat straight into
# the Concat's grid, storing no other scale; the simulator rounds them to their own grids first
# (as DenseNet's Concat, test_vendor_layers.KNOWN): those convs are not compared, the Concats
# differ by one step where the two roundings part
CONCAT_GRID = {"Concat:concat17": 1223, "Concat:concat26": 284}
INTO_CONCAT = {"Conv:conv16", "Conv:conv25"}


@pytest.mark.parametrize("platform", sorted({REPORTED[s]["platform"] for s in V8HEAD}))
def test_the_yolov8_head_per_layer_differs_only_where_it_reads_int8_constants(
        platform: str) -> None:  # fmt: skip
    buf = (HEADS / f"v8head_{platform}_i8.rknn").read_bytes()
    rows = vendor_file.per_layer(buf, vendor_file.load_layers(LAYERS / "v8head_i8.npz"))
    by_node = {r.node: r for r in rows}
    assert vendor_file.stored_ops(buf) == 26  # (two Splits: two tensors, two more rows)
    known = dict(CONSTANT_READERS)
    if platform in ("rk3576", "rv1126b"):
        assert len(rows) == 26 and not INTO_CONCAT & set(by_node)
        known.update(CONCAT_GRID)
    else:
        assert len(rows) == 28 and INTO_CONCAT <= set(by_node)
    assert by_node["Conv:conv38"].differ == 0  # the DFL conv of one output channel
    for r in rows:
        assert r.off_tie <= known.get(r.node, 0) and r.max_steps <= 1, r


@pytest.mark.parametrize("platform", sorted({REPORTED[s]["platform"] for s in V8HEAD}))
def test_one_channel_convs_per_layer_equal_the_simulator(platform: str) -> None:
    """oc1's two convs of one output channel (1x1 without bias, 3x3 with), fed the simulator's
    inputs: every element equal on every platform (its zero point read as 0: up to 255 steps)."""
    buf = (HEADS / f"oc1_{platform}_i8.rknn").read_bytes()
    rows = vendor_file.per_layer(buf, vendor_file.load_layers(LAYERS / "oc1_i8.npz"))
    assert len(rows) == vendor_file.stored_ops(buf) == 4
    assert {r.node for r in rows} >= {"Conv:conv6", "Conv:conv9"}
    assert all(r.differ == 0 for r in rows), rows


def test_the_simulator_computes_the_anchor_points_in_float() -> None:
    """Why the readers differ: fed the simulator's own inputs, the anchor points 0.5, 1.5, ...
    (rounded from the file's int8 values, which are 0.47, 1.48, ...) give the simulator's Sub
    exactly; the file's values do not."""
    m = fileformat.parse(memoryview((HEADS / "v8head_rk3588_i8.rknn").read_bytes()))
    t = next(t for t in m.tensors if t.name == "c44")
    stored = graph.from_nc1hwc2(m.const(t), t).astype(np.float64) * t.scale[0]
    layers = vendor_file.load_layers(LAYERS / "v8head_i8.npz")

    def value(name: str) -> np.ndarray:
        return (layers[name]["q"].astype(np.float64) - layers[name]["zp"]) * layers[name]["scale"]

    def grid(v: np.ndarray, name: str) -> np.ndarray:
        return np.clip(np.round(v / layers[name]["scale"]) + layers[name]["zp"], -128, 127)

    want = layers["sub45-rs"]["q"]
    assert np.array_equal(grid(np.round(stored * 2) / 2 - value("split41-rs"), "sub45-rs"), want)
    assert (grid(stored - value("split41-rs"), "sub45-rs") != want).sum() == 60


@pytest.mark.parametrize("model", ["widestem", "widestem24"])
@pytest.mark.parametrize("platform", sorted({REPORTED[s]["platform"] for s in V8HEAD}))
def test_stems_of_more_than_32_channels_per_layer_equal_the_simulator_but_for_ties(
        model: str, platform: str) -> None:  # fmt: skip
    """Three stems of 64 output channels on a 3-channel input (7x7 stride 2, 3x3, 6x6 stride 2)
    at the two input sizes that give rk3576's two weight layouts: every op within rounding ties
    on every platform (rk3576/rv1126b with the blocks of 32 channels read in their order: a
    weight layout that interleaves them put ~11000 of 16384 elements up to 255 steps off)."""
    buf = (HEADS / f"{model}_{platform}_i8.rknn").read_bytes()
    rows = vendor_file.per_layer(buf, vendor_file.load_layers(LAYERS / f"{model}_i8.npz"))
    assert len(rows) == vendor_file.stored_ops(buf) == 8
    assert sum(r.op_type == "ConvRelu" for r in rows) == 3
    assert all(r.off_tie == 0 and r.max_steps <= 1 for r in rows), rows


def _one_channel_convs(stem: str) -> tuple[fileformat.VendorModel, list[fileformat.Node]]:
    m = fileformat.parse(memoryview((HEADS / f"{stem}.rknn").read_bytes()))
    convs = [n for n in m.nodes if n.op_type == "Conv" and m.tensors[n.inputs[1]].shape[0] == 1]
    return m, convs


def _zw(m: fileformat.VendorModel, n: fileformat.Node) -> float:
    x, w, bias, y = (m.tensors[i] for i in (*n.inputs[:3], n.outputs[0]))
    return float(int8.conv_weights(int8.RegisterFile(m), n, x, w, bias, y, False).zw[0])


def test_a_one_channel_convs_zero_point_is_its_registers_signed_low_half() -> None:
    """oc1's 1x1 conv without bias on rk3588: A alone in the blob, -zw in register 0x4054."""
    m, convs = _one_channel_convs("oc1_rk3588_i8")
    n = next(n for n in convs if m.tensors[n.inputs[1]].shape[2] == 1)
    low = int8.RegisterFile(m).first_task(n)[0x4054] & 0xFFFF
    assert _zw(m, n) == -(low - 0x10000 if low & 0x8000 else low) and _zw(m, n) != 0
    bias = m.tensors[n.inputs[2]]
    assert np.array_equal(np.frombuffer(m.data(bias), "<i4")[1:], np.zeros(31, "<i4"))


@pytest.mark.parametrize("platform", ["rk3576", "rv1126b"])
def test_on_rk3576_a_one_channel_convs_zero_point_is_word_0_of_its_bscfg_constant(
        platform: str) -> None:  # fmt: skip
    """The same model's convs (1x1 without bias, 3x3 with): no register holds -zw there, the
    int32 at byte 0 of `<output>_BScfgTensor` does, and it is rk3588's register value."""
    m, convs = _one_channel_convs(f"oc1_{platform}_i8")
    ref, ref_convs = _one_channel_convs("oc1_rk3588_i8")
    want = {n.name: _zw(ref, n) for n in ref_convs}
    got = {n.name: _zw(m, n) for n in convs}
    assert len(got) == 2 and got == want and all(want.values())
    for n in convs:
        cfg = m.named_constant(m.tensors[n.outputs[0]].name + "_BScfgTensor")
        assert cfg is not None and -int(np.frombuffer(cfg, "<i4", 1)[0]) == got[n.name]
        assert 0x4054 not in (int8.RegisterFile(m).first_task(n) or {})


def test_a_one_channel_conv_without_a_decodable_zero_point_is_refused_by_name() -> None:
    """Its constant renamed away, then holding a value no int8 zero point has: one line each."""
    m, convs = _one_channel_convs("oc1_rk3576_i8")
    n = convs[0]
    at = next(i for i, t in enumerate(m.tensors)
              if t.name == m.tensors[n.outputs[0]].name + "_BScfgTensor")  # fmt: skip
    cfg = m.tensors[at]
    m.tensors[at] = dataclasses.replace(cfg, name=cfg.name + "_gone")
    with pytest.raises(VendorFormatError, match=rf"int8 conv '{n.name}' has one output channel, "
                                                r"whose weight zero point is not decoded "
                                                r"\(RKNPU f2: not found\)"):  # fmt: skip
        _zw(m, n)
    m.tensors[at] = cfg
    raw = bytearray(m.data(cfg))
    raw[:4] = np.int32(129).tobytes()
    m.buffers[cfg.buffer] = memoryview(bytes(raw))
    with pytest.raises(VendorFormatError, match=r"\(RKNPU f2: its value is out of range\)"):
        _zw(m, n)


def _tensor(native: list[int], shape: list[int]) -> fileformat.Tensor:
    return fileformat.Tensor(0, "c", "float16", 64, 5, native, shape, "", "", [], [], 0, 0, -1, 0)


def test_planes_padded_at_their_end_are_read_without_the_padding() -> None:
    """YOLOv5's anchors [3, 1, 1, 2] as the toolkit stores them: [3, 1, 1, 2, 8], each plane
    of 2 positions padded to 4 (the committed files' bytes: 96 values for 48)."""
    anchors = np.arange(1, 7, dtype=np.float16).reshape(3, 1, 1, 2)
    stored = np.zeros((3, 1, 4, 8), np.float16)
    stored[:, 0, :2, 0] = anchors[:, 0, 0, :]
    got = graph.from_nc1hwc2(stored.reshape(-1), _tensor([3, 1, 1, 2, 8], [3, 1, 1, 2]))
    assert got.shape == (3, 1, 1, 2) and np.array_equal(got, anchors)


def test_channels_are_gathered_from_their_blocks() -> None:
    """C = 12 in two blocks of C2 = 8 (the last 4 channels padding)."""
    planar = np.arange(12 * 2 * 3, dtype=np.float32).reshape(1, 12, 2, 3)
    padded = np.zeros((1, 16, 2, 3), np.float32)
    padded[:, :12] = planar
    stored = padded.reshape(1, 2, 8, 2, 3).transpose(0, 1, 3, 4, 2).reshape(-1)
    got = graph.from_nc1hwc2(stored, _tensor([1, 2, 2, 3, 8], [1, 12, 2, 3]))
    assert np.array_equal(got, planar)


@pytest.mark.parametrize("native, shape, size", [
    ([1, 2, 2, 3, 8], [1, 12, 2, 3], 95),  # the size is no whole number of planes
    ([1, 2, 2, 3, 8], [1, 20, 2, 3], 96),  # more channels than the blocks hold
    ([1, 2, 2, 3, 8], [1, 12, 3, 3], 96),  # the spatial dims differ
    ([2, 2, 3, 8], [1, 12, 2, 3], 96),  # not a 5-D native shape
])  # fmt: skip
def test_shapes_outside_the_layout_are_refused(native, shape, size) -> None:
    with pytest.raises(VendorFormatError, match="NC1HWC2 layout"):
        graph.from_nc1hwc2(np.zeros(size, np.float32), _tensor(native, shape))
