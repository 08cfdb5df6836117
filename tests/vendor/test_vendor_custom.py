"""Vendor .rknn files with custom operators (tests/vendor/fixtures_custom, make_custom_fixtures.py;
docs/vendor-rknn.md): rknn_init succeeds, a run before registration fails with one line, and the
custom nodes run through the ops registered afterwards, giving the vendor simulator's outputs."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.lite import RKNNLite
from rknnrt.model import container
from rknnrt.model.errors import VendorFormatError
from rknnrt.model.vendor_rknn import custom_nodes, fileformat
from rknnrt.toolkit.custom_ops import get_node_attr

sys.path.insert(0, str(Path(__file__).parents[1] / "custom_ops"))
from cst_helpers import floats_at, make_op, read_attr  # noqa: E402

CUSTOM = Path(__file__).parent / "fixtures_custom"
REPORTED: dict = json.loads((CUSTOM / "reported.json").read_text())
STEMS = sorted(REPORTED)
PLATFORMS = ("rk3588", "rk3576", "rk3566", "rk3562", "rv1126b")
# the fixture's attributes (make_custom_fixtures.py)
ALPHA = 0.75
SCALE = [0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 1.0, 3.0]
SHIFT = [0, 1, -1, 2, 0, -2, 1, 0]


class DualResidual:
    """(x alpha - y, y alpha - x): the toolkit's custom-op demo op."""

    op_type = "cstDualResidual"

    def compute(self, node, inputs):  # type: ignore[no-untyped-def]
        x, y = inputs
        alpha = get_node_attr(node, "alpha")
        return [x * alpha - y, y * alpha - x]


class ChannelAffine:
    """x[c'] scale[c] + shift[c], c' = C - 1 - c when reverse."""

    op_type = "cstChannelAffine"

    def compute(self, node, inputs):  # type: ignore[no-untyped-def]
        x = inputs[0]
        scale = np.asarray(get_node_attr(node, "scale"), np.float32).reshape(1, -1, 1, 1)
        shift = np.asarray(get_node_attr(node, "shift"), np.float32).reshape(1, -1, 1, 1)
        if int(get_node_attr(node, "reverse")):
            x = x[:, ::-1]
        return [x * scale + shift]


def _reference(stem: str) -> dict[str, np.ndarray]:
    with np.load(CUSTOM / f"{stem}.npz", allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def agreement(stem: str, outs: list[np.ndarray], sample: int) -> list[tuple[str, float, float]]:
    """Per output: ('int8', share within one step, max steps) or ('float', cosine, max abs)."""
    rep, ref = REPORTED[stem], _reference(stem)
    rows = []
    for k, name in enumerate(rep["outputs"]):
        got = np.asarray(outs[k], np.float64).ravel()
        want = ref[f"out{k}"][sample].astype(np.float64).ravel()
        assert got.shape == want.shape
        quant = rep["io_quant"].get(name)
        if rep["dtype"] == "i8" and quant:
            steps = np.abs(got - want) / quant["scale"]
            rows.append(("int8", float(np.mean(steps <= 1 + 1e-3)), float(steps.max())))
        else:
            cos = got @ want / (np.linalg.norm(got) * np.linalg.norm(want))
            rows.append(("float", float(cos), float(np.abs(got - want).max())))
    return rows


def test_the_set_covers_every_platform_and_dtype() -> None:
    assert {(REPORTED[s]["platform"], REPORTED[s]["dtype"]) for s in STEMS} == {
        (p, d) for p in PLATFORMS for d in ("i8", "fp16")
    }


@pytest.mark.parametrize("stem", STEMS)
def test_custom_nodes_are_read_with_their_attributes(stem: str) -> None:
    m = fileformat.parse(memoryview((CUSTOM / f"{stem}.rknn").read_bytes()))
    # Model field 21 lists them only in the first build of a toolkit process (rk3588 and rk3576
    # int8 here); the others are told by the vendor's "cst" prefix on a CPU node
    assert m.custom_op_types == ("cstDualResidual", "cstChannelAffine")
    nodes = {n.op_type: n for n in m.nodes if n.op_type in m.custom_op_types}
    assert nodes["cstDualResidual"].target == 0  # on the CPU
    assert custom_nodes.attributes(nodes["cstDualResidual"]) == {"alpha": ALPHA}
    assert custom_nodes.attributes(nodes["cstChannelAffine"]) == {
        "reverse": 1, "scale": SCALE, "shift": SHIFT, "tag": b"ch"}  # fmt: skip


@pytest.mark.parametrize("stem", STEMS)
def test_registered_ops_give_the_simulators_outputs(stem: str) -> None:
    ref = _reference(stem)
    lite = RKNNLite()
    assert lite.load_rknn(str(CUSTOM / f"{stem}.rknn")) == 0
    assert lite.init_runtime() == 0
    assert lite.register_custom_ops([DualResidual(), ChannelAffine()]) == 0
    for s in range(ref["in0"].shape[0]):
        outs = lite.inference(inputs=[ref["in0"][s], ref["in1"][s]], data_format=["nchw"] * 2)
        for kind, value, worst in agreement(stem, outs, s):
            if kind == "int8":
                assert value >= 0.99 and worst <= 1 + 1e-3, (stem, value, worst)
            else:
                assert value >= 0.9999, (stem, value, worst)
    lite.release()


def _init(stem: str) -> rk.rknn_context:
    model = (CUSTOM / f"{stem}.rknn").read_bytes()
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctypes.byref(ctx), model, len(model), 0, None) == 0
    return ctx


def _set_inputs(ctx: rk.rknn_context, xs: list[np.ndarray]) -> None:
    ins = (rk.rknn_input * len(xs))()
    for i, x in enumerate(xs):
        ins[i].index, ins[i].buf, ins[i].size = i, x.ctypes.data, x.nbytes
        ins[i].type, ins[i].fmt = rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NCHW
    assert rk.rknn_inputs_set(ctx, len(xs), ins) == 0


def test_a_run_before_registration_fails_with_one_line(rknn_log) -> None:  # type: ignore[no-untyped-def]
    ref = _reference("custom_rk3588_i8")
    ctx = _init("custom_rk3588_i8")
    xs = [np.ascontiguousarray(ref["in0"][0]), np.ascontiguousarray(ref["in1"][0])]
    _set_inputs(ctx, xs)
    assert rk.rknn_run(ctx, None) == rk.RKNN_ERR_FAIL
    (line,) = rknn_log.take("E")
    assert "cstDualResidual" in line and "rknn_register_custom_ops" in line
    assert rk.rknn_destroy(ctx) == 0


def test_registering_only_some_of_the_files_ops_is_refused(rknn_log) -> None:  # type: ignore[no-untyped-def]
    ctx = _init("custom_rk3576_fp16")
    assert rk.rknn_register_custom_ops(ctx, [DualResidual()], 1) == rk.RKNN_ERR_PARAM_INVALID
    (line,) = rknn_log.take("E")
    assert "missing: cstChannelAffine" in line
    assert rk.rknn_destroy(ctx) == 0


def test_c_callbacks_read_the_typed_attributes() -> None:
    """Through rknn_custom_op_get_op_attr: floats as FLOAT32, ints as INT64, the string and the
    node name as UINT8 (docs/custom-ops.md), on a C-structure op with ctypes callbacks."""
    seen: dict[str, np.ndarray | None] = {}

    def affine_init(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        for name in (b"scale", b"shift", b"reverse", b"tag", b"name", b"absent"):
            seen[name.decode()] = read_attr(op_ctx, name)
        return 0

    def affine_compute(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        x = floats_at(ins[0]).reshape(8, -1)[::-1]
        y = x * np.float32(SCALE)[:, None] + np.float32(SHIFT)[:, None]
        floats_at(outs[0])[:] = y.ravel()
        return 0

    def dual_compute(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        alpha = read_attr(op_ctx, b"alpha")
        assert alpha is not None and alpha.dtype == np.float32
        x, y = floats_at(ins[0]), floats_at(ins[1])
        floats_at(outs[0])[:] = x * alpha[0] - y
        floats_at(outs[1])[:] = y * alpha[0] - x
        return 0

    stem = "custom_rk3588_fp16"
    ref = _reference(stem)
    ctx = _init(stem)
    dual, keep_d = make_op(b"cstDualResidual", compute=dual_compute)
    affine, keep_a = make_op(b"cstChannelAffine", init=affine_init, compute=affine_compute)
    ops = (rk.rknn_custom_op * 2)(dual, affine)
    assert rk.rknn_register_custom_ops(ctx, ops, 2) == 0
    assert seen["scale"].dtype == np.float32 and seen["scale"].tolist() == SCALE
    assert seen["shift"].dtype == np.int64 and seen["shift"].tolist() == SHIFT
    assert seen["reverse"].dtype == np.int64 and seen["reverse"].tolist() == [1]
    assert seen["tag"].dtype == np.uint8 and bytes(seen["tag"]) == b"ch"
    assert bytes(seen["name"]) == b"cstChannelAffine:affine" and seen["absent"] is None
    xs = [np.ascontiguousarray(ref["in0"][0]), np.ascontiguousarray(ref["in1"][0])]
    _set_inputs(ctx, xs)
    assert rk.rknn_run(ctx, None) == 0
    outs = (rk.rknn_output * 2)()
    for i in range(2):
        outs[i].index, outs[i].want_float = i, 1
    assert rk.rknn_outputs_get(ctx, 2, outs, None) == 0
    got = [np.ctypeslib.as_array(ctypes.cast(o.buf, ctypes.POINTER(ctypes.c_float)),
                                 (o.size // 4,)).copy() for o in outs]  # fmt: skip
    assert rk.rknn_outputs_release(ctx, 2, outs) == 0
    for _, cos, _ in agreement(stem, got, 0):
        assert cos >= 0.9999
    assert rk.rknn_destroy(ctx) == 0
    del keep_d, keep_a


ALPHA_BYTES = struct.pack("<d", ALPHA)


def _with_blob(stem: str, old: bytes, new: bytes) -> memoryview:
    data = (CUSTOM / f"{stem}.rknn").read_bytes()
    assert data.count(old) == 1
    return memoryview(data.replace(old, new))


@pytest.mark.parametrize(
    "old, new, words",
    [
        (b"\x02dtype\x00\x02\x00\x00\x00f\x00", b"\x02dtype\x00\x02\x00\x00\x00q\x00",
         "'alpha' of type 'q'"),
        (b"\x01value\x00" + ALPHA_BYTES, b"\x07value\x00" + ALPHA_BYTES, "BSON type 0x7"),
        (b"-\x00\x00\x00\x03alpha", b"\xff\x00\x00\x00\x03alpha", "invalid document length"),
    ],
)  # fmt: skip
def test_an_undecodable_custom_attribute_is_refused_by_name(old: bytes, new: bytes,
                                                            words: str) -> None:  # fmt: skip
    with pytest.raises(VendorFormatError, match="custom op cstDualResidual") as info:
        container.read(_with_blob("custom_rk3588_fp16", old, new))
    assert words in str(info.value) and "\n" not in str(info.value)


@pytest.fixture(scope="module")
def c_app(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from rknnrt.capi.build import missing_requirements

    missing = missing_requirements()
    if missing:
        pytest.skip("cannot build librknnrt.so here: " + "; ".join(missing))
    from rknnrt.capi.sdk import write_sdk

    sdk = write_sdk(tmp_path_factory.mktemp("sdk"))
    binary = tmp_path_factory.mktemp("bin") / "vendor_custom_app"
    compiler = shutil.which("gcc") or shutil.which("cc")
    assert compiler, "no C compiler"
    source = Path(__file__).parent / "c" / "vendor_custom_app.c"
    done = subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-I",
                           str(sdk / "include"), str(source), "-o", str(binary), "-L",
                           str(sdk / "lib"), "-lrknnrt"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return sdk, binary


def run_c_app(c_app: tuple[Path, Path], model: Path, xs: list[np.ndarray], ops: str,
              work: Path) -> tuple[dict[str, str], list[str]]:  # fmt: skip
    """The C application's printed lines by their first word, and its E lines."""
    sdk, binary = c_app
    paths = []
    for i, x in enumerate(xs):
        paths.append(work / f"in{i}.f32")
        np.ascontiguousarray(x, np.float32).tofile(paths[-1])
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LD_LIBRARY_PATH": str(sdk / "lib"),
           "HOME": os.environ.get("HOME", "/")}  # fmt: skip
    done = subprocess.run([str(binary), str(model), *map(str, paths), ops], capture_output=True,
                          text=True, env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, _, rest = line.partition(" ")
        if key == "attr":
            key, _, rest = line.partition(" ")[2].partition(" ")
            key = "attr " + key
        lines[key] = rest
    return lines, [e for e in done.stderr.splitlines() if e.startswith("E RKNN:")]


@pytest.mark.slow
@pytest.mark.parametrize("stem", ["custom_rk3588_i8", "custom_rk3566_fp16"])
def test_c_application_registers_the_ops_through_librknnrt(c_app, stem, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ref = _reference(stem)
    lines, errors = run_c_app(c_app, CUSTOM / f"{stem}.rknn", [ref["in0"][1], ref["in1"][1]],
                              "both", tmp_path)  # fmt: skip
    assert lines["unregistered"] == str(rk.RKNN_ERR_FAIL)
    assert len(errors) == 1 and "not registered" in errors[0]
    assert lines["register"] == "0" and lines["run"] == "0"
    f32, i64, u8 = rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_INT64, rk.RKNN_TENSOR_UINT8
    assert lines["attr alpha"] == f"{f32} 1 0.75"
    assert lines["attr scale"] == f"{f32} 8 " + " ".join(f"{v:.7g}" for v in SCALE)
    assert lines["attr shift"] == f"{i64} 8 " + " ".join(map(str, SHIFT))
    assert lines["attr reverse"] == f"{i64} 1 1" and lines["attr tag"] == f"{u8} 2 99 104"
    outs = [np.array(lines[f"out{k}"].split(), np.float32) for k in range(2)]
    for kind, value, worst in agreement(stem, outs, 1):
        assert value >= (0.99 if kind == "int8" else 0.9999), (stem, value, worst)


def test_which_nodes_are_custom_ops() -> None:
    """Model field 21's list when the file has one (any name, even a built-in op's); else a CPU
    node with the vendor's "cst" prefix; an unknown op otherwise stays refused by name."""
    listed = ("ArgMax", "myOp")
    assert fileformat.is_custom_op("myOp", 0, listed)
    assert fileformat.is_custom_op("ArgMax", 0, listed)
    assert not fileformat.is_custom_op("cstOther", 0, listed)  # the list is the whole truth
    assert fileformat.is_custom_op("cstOther", 0, ())
    assert not fileformat.is_custom_op("cstOther", 2, ())  # an NPU node is the compiler's
    assert not fileformat.is_custom_op("exUnknown", 0, ())
    from rknnrt.model.vendor_rknn import registry

    node = fileformat.Node(0, "ArgMax", "a", 0, [0], [1], 0, None)
    assert registry.lookup(node, listed) is registry.CUSTOM
    assert registry.lookup(node) is registry.DECODERS["ArgMax"]
    with pytest.raises(VendorFormatError, match="op exUnknown"):
        registry.lookup(fileformat.Node(0, "exUnknown", "u", 0, [0], [1], 0, None))


def _bson(doc: dict) -> bytes:
    """A BSON document of the element types the toolkit writes (test-side encoder)."""
    body = b""
    for key, value in doc.items():
        name = key.encode() + b"\0"
        if value is None:
            body += b"\x0a" + name
        elif isinstance(value, dict):
            body += b"\x03" + name + _bson(value)
        elif isinstance(value, list):
            body += b"\x04" + name + _bson({str(i): v for i, v in enumerate(value)})
        elif isinstance(value, str):
            body += b"\x02" + name + struct.pack("<i", len(value) + 1) + value.encode() + b"\0"
        elif isinstance(value, float):
            body += b"\x01" + name + struct.pack("<d", value)
        else:
            body += b"\x12" + name + struct.pack("<q", value)
    return struct.pack("<i", len(body) + 5) + body + b"\0"


def test_attribute_documents_of_every_stored_kind() -> None:
    doc = {"e": {"dtype": "fs", "value": []}, "big": {"dtype": "i", "value": 1 << 40},
           "t": None, "s": {"dtype": "s", "value": "ab"}, "f": {"dtype": "f", "value": 0.5}}
    node = fileformat.Node(0, "cstX", "x", 0, [0], [1], 0, None, memoryview(_bson(doc)))
    attrs = custom_nodes.attributes(node)
    assert sorted(attrs) == ["big", "e", "f", "s"]  # the null (a dropped tensor) is absent
    assert attrs["big"] == 1 << 40 and attrs["f"] == 0.5 and attrs["s"] == b"ab"
    assert attrs["e"].dtype == np.float32 and attrs["e"].size == 0
    deep = {"a": {"b": {"c": {"d": {"e": {"f": 1.0}}}}}}
    for bad, words in ((_bson(deep), "nested too deeply"), (_bson(doc)[:-3], "document length"),
                       (_bson({"f": {"dtype": "f", "value": "x"}}), "does not match")):
        node = fileformat.Node(0, "cstX", "x", 0, [0], [1], 0, None, memoryview(bad))
        with pytest.raises(VendorFormatError, match=words):
            custom_nodes.attributes(node)
