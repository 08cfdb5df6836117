"""`rknnrt run` and the CLI's Session on rv1103/rv1106 files: the mini runtime has no
rknn_inputs_set / rknn_outputs_get (refused faithfully), so the command line binds zero-copy
memory (rknn_create_mem + rknn_set_io_mem), NHWC rows padded to the input's w_stride."""

from __future__ import annotations

import re

import numpy as np

from rknnrt import cli
from rknnrt.model import files

from .test_vendor_mini import MINI, REPORTED, run_zero_copy


def _reference(stem: str) -> dict[str, np.ndarray]:
    with np.load(MINI / f"{stem}.npz", allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def test_session_runs_a_mini_file_through_zero_copy_memory(make_ctx) -> None:
    """oddwidth (two inputs, 3 and 5 channels, 15 pixels wide) agrees with the simulator
    through the CLI's Session as through a direct zero-copy run, within one int8 step."""
    stem = "oddwidth_rv1106_i8"
    rep, ref = REPORTED[stem], _reference(stem)
    blob = files.read_bytes(str(MINI / f"{stem}.rknn"))
    s = cli.Session(blob)
    assert not s.general_api
    direct_ctx = make_ctx(blob)
    for sample in range(ref["in0"].shape[0]):
        nchw = [ref[f"in{i}"][sample] for i in range(2)]
        s.feed([np.ascontiguousarray(x.transpose(0, 2, 3, 1), np.float32) for x in nchw])
        got = s.infer()
        direct = run_zero_copy(direct_ctx, nchw)
        for k, name in enumerate(rep["outputs"]):
            np.testing.assert_array_equal(got[k], direct[k])
            steps = np.abs(got[k].ravel() - ref[f"out{k}"][sample].ravel())
            steps /= rep["io_quant"][name]["scale"]
            assert steps.max() <= 1 + 1e-3, (name, steps.max())
    s.close()
    assert not s.alive


def test_cli_run_on_a_mini_file(tmp_path, capsys) -> None:
    stem = "convpool_rv1106_i8"
    ref = _reference(stem)
    x = np.ascontiguousarray(ref["in0"][0].transpose(0, 2, 3, 1), np.float32)
    np.save(tmp_path / "x.npy", x)
    assert cli.main(["run", str(MINI / f"{stem}.rknn"), "--input", str(tmp_path / "x.npy")]) == 0
    out, err = capsys.readouterr()
    assert "E RKNN" not in err and "E RKNN" not in out
    line = re.search(r"output 0 y: shape \[1, 10\], min (\S+), max (\S+),", out)
    assert line is not None, out
    want = ref["out0"][0]
    scale = REPORTED[stem]["io_quant"]["y"]["scale"]
    assert abs(float(line.group(1)) - want.min()) <= scale * 1.001
    assert abs(float(line.group(2)) - want.max()) <= scale * 1.001
    assert "zero-copy" in out and "no RKNN_QUERY_PERF_RUN" in out
    # random inputs (int8, the input attribute's type) run as well
    assert cli.main(["run", str(MINI / f"{stem}.rknn")]) == 0
    assert "E RKNN" not in "".join(capsys.readouterr())


def test_nhwc_rows_are_padded_to_the_attributes_w_stride() -> None:
    """An input attribute whose w_stride exceeds the width (as NATIVE_INPUT_ATTR's 16 for
    oddwidth's 15-pixel input) gets its rows zero-padded to it."""
    import rknnrt as rk
    from rknnrt.client import ZeroCopyIO

    attr = rk.rknn_tensor_attr(fmt=rk.RKNN_TENSOR_NHWC, w_stride=16)
    x = np.arange(6 * 15 * 3, dtype=np.int8).reshape(1, 6, 15, 3)
    padded = ZeroCopyIO._padded(x, attr)
    assert padded.shape == (1, 6, 16, 3)
    np.testing.assert_array_equal(padded[:, :, :15], x)
    assert not padded[:, :, 15:].any()
    attr.fmt = rk.RKNN_TENSOR_NCHW  # only NHWC rows are padded
    assert ZeroCopyIO._padded(x, attr).shape == x.shape
