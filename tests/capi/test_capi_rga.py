"""The librga stand-in from C and C++: every operation against the numpy reference of its
documented behaviour (rga_reference.py), the vendor's status codes for refused cases, and the
zoo's flow (RGA into a zero-copy input fd, NC1HWC2 output) against the Python API."""

from __future__ import annotations

import re

import numpy as np
import pytest

import rknnrt as rk

from . import rga_reference as ref
from .test_capi_runtime import conv4d_float16, python_general

W, H = 64, 48


def read_results(path) -> dict[str, np.ndarray]:
    data, found, pos = path.read_bytes(), {}, 0
    while pos < len(data):
        end = data.index(b"\n", pos)
        label, w, h, size = data[pos:end].decode().split()
        pos = end + 1
        raw = np.frombuffer(data[pos : pos + int(size)], np.uint8)
        found[label] = (raw, int(w), int(h))
        pos += int(size)
    return found


def close(got: np.ndarray, want: np.ndarray, label: str, tol: int = 1) -> None:
    """Within `tol` everywhere (float rounding of ties), equal on at least 95 % of the values."""
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max() <= tol, (label, diff.max())
    assert (diff > 0).mean() < 0.05, (label, (diff > 0).mean())


@pytest.fixture(scope="module")
def ops(programs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("rga")
    pic = np.random.default_rng(5).integers(0, 256, (H, W, 3), np.uint8)
    (folder / "pic.rgb").write_bytes(pic.tobytes())
    programs.build("rga_ops.c", "-lrga")
    done = programs.run("rga_ops.c", folder / "pic.rgb", folder / "out.bin")
    assert "ALL OK" in done.stdout
    return pic, read_results(folder / "out.bin"), done


def test_resize_matches_bilinear_up_and_average_down(ops):
    pic, got, _ = ops
    for label, (h, w) in {"down": (24, 32), "up": (72, 96), "mixed": (40, 80)}.items():
        raw, gw, gh = got[label]
        assert (gw, gh) == (w, h)
        close(raw.reshape(h, w, 3), ref.to_u8(ref.resize(pic, h, w)), label)
    raw, _, _ = got["blit"]  # c_RkRgaBlit: the same resize into BGR888
    close(raw.reshape(24, 32, 3), ref.to_u8(ref.resize(pic, 24, 32))[..., ::-1], "blit")


def test_colour_formats(ops):
    pic, got, _ = ops
    np.testing.assert_array_equal(got["bgr"][0].reshape(H, W, 3), pic[..., ::-1])
    rgba = got["rgba"][0].reshape(H, W, 4)
    np.testing.assert_array_equal(rgba[..., :3], pic)
    assert (rgba[..., 3] == 255).all()
    for layout in ("nv12", "nv21", "i420"):
        close(got[layout][0], ref.yuv420(pic, layout), layout)
    close(got["gray"][0], ref.to_u8(ref.rgb_to_yuv(pic)[..., 0]).reshape(-1), "gray")
    assert got["gray"][0].min() >= 16 and got["gray"][0].max() <= 235  # BT.601 limited range
    nv12 = ref.yuv420(pic, "nv12")
    close(got["nv12_to_rgb"][0].reshape(H, W, 3), ref.to_u8(ref.nv12_to_rgb(nv12, H, W)),
          "nv12_to_rgb", tol=2)  # fmt: skip


def test_geometry_fill_and_handles(ops):
    pic, got, _ = ops
    shaped = {k: v[0][: v[1] * v[2] * 3].reshape(v[2], v[1], 3) for k, v in got.items()
              if k in ("copy", "rot90", "rot180", "rot270", "flip_h", "flip_v", "translate",
                       "crop", "fill", "rectangle", "letterbox", "handle_fd")}  # fmt: skip
    np.testing.assert_array_equal(shaped["copy"], pic)
    np.testing.assert_array_equal(shaped["rot90"], np.rot90(pic, -1))  # clockwise
    np.testing.assert_array_equal(shaped["rot270"], np.rot90(pic, 1))
    np.testing.assert_array_equal(shaped["rot180"], pic[::-1, ::-1])
    np.testing.assert_array_equal(shaped["flip_h"], pic[:, ::-1])
    np.testing.assert_array_equal(shaped["flip_v"], pic[::-1])
    np.testing.assert_array_equal(shaped["handle_fd"], pic[::-1])
    moved = np.zeros_like(pic)
    moved[4:, 8:] = pic[:-4, :-8]
    np.testing.assert_array_equal(shaped["translate"], moved)
    np.testing.assert_array_equal(shaped["crop"], pic[8:32, 12:44])
    filled = pic.copy()
    filled[6:16, 4:24] = (0x40, 0x80, 0xFF)
    np.testing.assert_array_equal(shaped["fill"], filled)
    framed = pic.copy()
    framed[6:16, 4:24] = (0, 0xFF, 0)
    framed[8:14, 6:22] = pic[8:14, 6:22]
    np.testing.assert_array_equal(shaped["rectangle"], framed)
    boxed = np.full_like(pic, 114)
    boxed[6:42, 8:56] = ref.to_u8(ref.resize(pic, 36, 48))
    close(shaped["letterbox"], boxed, "letterbox")


def test_refusals_carry_the_vendor_codes(ops):
    _, _, done = ops
    codes = dict(re.findall(r"^status (\w+) (-?\d+)$", done.stdout, re.M))
    invalid, unsupported = str(rk_status("INVALID_PARAM")), str(rk_status("NOT_SUPPORTED"))
    assert codes == {
        "release_twice": invalid, "import_phys": "0", "rgb_stride_30": invalid,
        "nv12_odd_height": invalid, "rgb565": unsupported, "scale_32x": unsupported,
        "null_buffer": invalid, "rect_outside": invalid,
    }  # fmt: skip
    assert "message Unsupported function: imresize: scale" in done.stdout
    assert "Error width stride not align to 4" in done.stderr
    assert "Error yuv not align to 2" in done.stderr
    assert "RGA_api version : 1.10.3" in done.stdout


def rk_status(name: str) -> int:
    return {"INVALID_PARAM": -3, "NOT_SUPPORTED": -1}[name]  # im2d_type.h's IM_STATUS


def test_cxx_overloads(programs):
    programs.build("rga_cxx.cpp", "-lrga")
    done = programs.run("rga_cxx.cpp")
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["imcheck"] == "2" and lines["imresize"] == "1" and lines["imcopy"] == "1"
    assert lines["improcess"] == "1 fence -1"
    assert lines["filled"] == "1 copied 1" and lines["release"] == "1"
    assert lines["bad"].startswith("Unsupported function")
    assert lines["version"] == "1"


@pytest.mark.slow  # two model conversions and a run; the operations above are the fast check
def test_rga_into_zero_copy_input_with_nc1hwc2_output(programs, convert, tmp_path):
    model = conv4d_float16(convert)
    pic = np.random.default_rng(6).integers(0, 256, (24, 40, 3), np.uint8)
    (tmp_path / "conv.rknnrt").write_bytes(model)
    (tmp_path / "pic.rgb").write_bytes(pic.tobytes())
    programs.build("rga_zero_copy.c", "-lrga")
    done = programs.run("rga_zero_copy.c", tmp_path / "conv.rknnrt", tmp_path / "pic.rgb")
    assert "ALL OK" in done.stdout and "E RKNN" not in done.stderr and "E RGA" not in done.stderr
    lines = {line.split(" ", 1)[0]: line.split()[1:] for line in done.stdout.splitlines()}
    resized = np.array(lines["resized"], np.uint8).reshape(16, 16, 3)
    close(resized, ref.to_u8(ref.resize(pic, 16, 16)), "zero-copy resize")
    expected = python_general(model, resized[None], rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC)
    np.testing.assert_array_equal(np.array(lines["output"], np.float32), expected)
