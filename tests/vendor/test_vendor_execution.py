"""Level 2: vendor files run through every surface and agree with the vendor's simulator."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import rknnrt as rk
from rknnrt import cli
from rknnrt.lite import RKNNLite
from rknnrt.model import container
from rknnrt.model.vendor_rknn import fileformat

from .vendor_data import FIXTURES, REPORTED, SUPPORTED, UNSUPPORTED, model_bytes, reference


def _run_lite(stem: str) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """Outputs (float32, one list entry per output, samples stacked) and the reference."""
    ref = reference(stem)
    n_in = len(REPORTED[stem]["inputs"])
    lite = RKNNLite()
    assert lite.load_rknn(str(FIXTURES / f"{stem}.rknn")) == 0
    assert lite.init_runtime() == 0
    per_output: list[list[np.ndarray]] = []
    for s in range(ref["in0"].shape[0]):
        outs = lite.inference(inputs=[ref[f"in{i}"][s] for i in range(n_in)],
                              data_format=["nchw"] * n_in)  # fmt: skip
        for k, out in enumerate(outs):
            if len(per_output) <= k:
                per_output.append([])
            per_output[k].append(np.asarray(out, np.float64))
    lite.release()
    return [np.stack(v) for v in per_output], ref


@pytest.mark.parametrize("stem", SUPPORTED)
def test_outputs_agree_with_the_vendor_simulator(stem: str) -> None:
    outs, ref = _run_lite(stem)
    rep = REPORTED[stem]
    for k, name in enumerate(rep["outputs"]):
        got, want = outs[k].ravel(), ref[f"out{k}"].astype(np.float64).ravel()
        assert got.shape == want.shape
        quant = rep["io_quant"].get(name)
        if rep["dtype_changed"].get(name) == "int8":
            steps = np.abs(got - want) / quant["scale"]
            assert np.mean(steps <= 1 + 1e-3) >= 0.999, (stem, name, steps.max())
            assert steps.max() <= 2 + 1e-3, (stem, name)
        else:  # float16 outputs (fp16 models, and int8 models ending in a float op)
            cosine = got @ want / (np.linalg.norm(got) * np.linalg.norm(want))
            assert cosine >= 0.99999, (stem, name, cosine)
            assert np.abs(got - want).max() <= 0.02 * max(1.0, np.abs(want).max())


def _lut_entry_patched(data: bytes) -> bytes:
    """The file with one LE lookup-table entry of ConvSigmoid's upload task set to 0."""
    m = fileformat.parse(memoryview(data))
    blob = bytes(m.data(m.by_kind(fileformat.KIND_REGCMD)))
    at = data.find(blob)
    entries = np.frombuffer(blob, "<u8").copy()
    lut_writes = np.nonzero((entries & 0xFFFF) == 0x4104)[0]
    k = lut_writes[300]  # inside the first (LE) table, far from its ends
    entries[k] &= ~np.uint64(0xFFFFFFFF << 16)
    return data[:at] + entries.tobytes() + data[at + len(blob) :]


def _bn_cfg_zeroed(data: bytes) -> bytes:
    """rk3576: the conv output's BnCfg constant without its multiplier operand."""
    m = fileformat.parse(memoryview(data))
    cfg = next(t for t in m.tensors if t.name == "sw_BnCfg_BNcfgTensor")
    blob = bytes(m.data(cfg))
    at = data.find(blob)
    patched = bytearray(blob)
    patched[32:34] = b"\0\0"  # u16 word 16
    return data[:at] + bytes(patched) + data[at + len(blob) :]


@pytest.mark.parametrize(
    ("stem", "patch", "words"),
    [
        ("sigmoid_rk3588_i8", _lut_entry_patched, "ConvSigmoid"),
        ("swish_rk3576_i8", _bn_cfg_zeroed, "ConvExSwish"),
    ],  # fmt: skip
)
def test_undecodable_lookup_tables_fail_init_with_one_line(stem, patch, words, capi,
                                                           rknn_log) -> None:  # fmt: skip
    """Every fixture decodes (vendor_data.UNSUPPORTED is empty); a table that is no sigmoid or
    swish within one unit, or a missing multiplier, is refused by name at rknn_init."""
    assert not UNSUPPORTED
    ctx = rk.rknn_context()
    data = patch(model_bytes(stem))
    assert data != model_bytes(stem) and len(data) == len(model_bytes(stem))
    assert capi(rk.rknn_init, ctx, data, len(data), 0, None) == rk.RKNN_ERR_MODEL_INVALID
    errors = rknn_log.take("E")
    assert len(errors) == 1, errors
    assert words in errors[0] and "not decoded" in errors[0]


def test_int8_scale_recovery_is_exact_on_rk3588_where_inputs_stay_in_range() -> None:
    """The conv/relu/pool/gemm model reproduces the simulator bit for bit (int8 codes)."""
    outs, ref = _run_lite("convpool_rk3588_i8")
    scale = REPORTED["convpool_rk3588_i8"]["io_quant"]["y"]["scale"]
    assert np.array_equal(np.round(outs[0] / scale), np.round(ref["out0"] / scale))


def test_every_init_path_takes_a_vendor_file(capi, make_ctx, tmp_path) -> None:
    stem = "twoinput_rk3588_i8"
    data = model_bytes(stem)
    ref = reference(stem)
    path = tmp_path / "m.rknn"
    path.write_bytes(data)
    results = []
    for how in ("buffer", "path", "zero_copy", "array"):
        ctx = rk.rknn_context()
        if how == "path":
            rc = capi(rk.rknn_init, ctx, str(path), 0, 0, None)
        elif how == "zero_copy":
            mem = rk.rknn_create_mem2(0, len(data), rk.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
            ctypes.memmove(mem.contents.virt_addr, data, len(data))
            ext = rk.rknn_init_extend(real_model_size=len(data), model_buffer_fd=mem.contents.fd)
            rc = capi(rk.rknn_init, ctx, mem.contents.virt_addr, len(data),
                      rk.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, ext)  # fmt: skip
        elif how == "array":
            rc = capi(rk.rknn_init, ctx, np.frombuffer(data, np.uint8), len(data), 0, None)
        else:
            rc = capi(rk.rknn_init, ctx, data, len(data), 0, None)
        assert rc == rk.RKNN_SUCC, how
        results.append(_run_c_api(ctx, [ref["in0"][0], ref["in1"][0]]))
        assert rk.rknn_destroy(ctx) == rk.RKNN_SUCC
        if how == "zero_copy":
            assert rk.rknn_destroy_mem(0, mem) == rk.RKNN_SUCC
    for other in results[1:]:
        np.testing.assert_array_equal(results[0], other)
    steps = np.abs(results[0] - ref["out0"][0].ravel()) / REPORTED[stem]["io_quant"]["y"]["scale"]
    assert steps.max() <= 1 + 1e-3


def _run_c_api(ctx: rk.rknn_context, arrays: list[np.ndarray]) -> np.ndarray:
    inputs = (rk.rknn_input * len(arrays))()
    for k, array in enumerate(arrays):
        inputs[k].index = k
        inputs[k].buf = array.ctypes.data
        inputs[k].size = array.nbytes
        inputs[k].type = rk.RKNN_TENSOR_FLOAT32
        inputs[k].fmt = rk.RKNN_TENSOR_NCHW
    assert rk.rknn_inputs_set(ctx, len(arrays), inputs) == rk.RKNN_SUCC
    assert rk.rknn_run(ctx, None) == rk.RKNN_SUCC
    outputs = (rk.rknn_output * 1)()
    outputs[0].want_float = 1
    assert rk.rknn_outputs_get(ctx, 1, outputs, None) == rk.RKNN_SUCC
    out = np.ctypeslib.as_array(ctypes.cast(outputs[0].buf, ctypes.POINTER(ctypes.c_float)),
                                (outputs[0].size // 4,)).copy()  # fmt: skip
    assert rk.rknn_outputs_release(ctx, 1, outputs) == rk.RKNN_SUCC
    return out


def test_container_read_returns_rknnrt_sections() -> None:
    sections = container.read(memoryview(model_bytes("mlp_rk3588_fp16")))
    assert sections.version == container.VENDOR_FORMAT_VERSION
    # the file's stored total weight size, which the log reports as 3.25KB
    assert REPORTED["mlp_rk3588_fp16"]["memory"]["Weight"] == "3.25KB"
    assert len(sections.weights) == 3328
    assert bytes(sections.metadata).startswith(b"{")


def test_cli_info_and_run_take_a_vendor_file(capsys) -> None:
    path = FIXTURES / "wide_rk3588_fp16.rknn"
    assert cli.main(["info", str(path)]) == 0
    info = capsys.readouterr().out
    assert "custom string: 'vendor-fixture'" in info
    assert "dims=[1, 1, 10, 11, 8], n_elems=880" in info  # native input NC1HWC2, C2 8
    assert cli.main(["run", str(path)]) == 0
    assert "rknn_run" in capsys.readouterr().out
