"""Memory calls, zero-copy inference and the cache-coherency model (facts §4.1, §5.4, §5.6)."""

from __future__ import annotations

import ctypes
import mmap
import os
import re

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.toolkit.samples import default_input
from tests.helpers import query_attr as attr

NO_CTX = rk.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT


def view(mem, dtype=np.uint8, count: int | None = None) -> np.ndarray:
    m = mem.contents
    raw = np.frombuffer((ctypes.c_char * m.size).from_address(m.virt_addr + m.offset), np.uint8)
    data = raw.view(dtype)
    return data if count is None else data[:count]


def general_api(ctx, image: np.ndarray) -> np.ndarray:
    inputs = (rk.rknn_input * 1)()
    inputs[0].buf, inputs[0].size = image.ctypes.data, image.nbytes
    inputs[0].type, inputs[0].fmt = rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC
    assert rk.rknn_inputs_set(ctx, 1, inputs) == 0 and rk.rknn_run(ctx, None) == 0
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    assert rk.rknn_outputs_get(ctx, 1, outs, None) == 0
    out = np.frombuffer((ctypes.c_char * outs[0].size).from_address(outs[0].buf), np.float32)
    result = out.copy()
    assert rk.rknn_outputs_release(ctx, 1, outs) == 0
    return result


def bind_zero_copy(ctx, in_type=rk.RKNN_TENSOR_UINT8):
    """Bind fresh memory to input 0 (uint8 NHWC) and output 0 (float32); returns both mems."""
    ia = attr(ctx, rk.RKNN_QUERY_NATIVE_INPUT_ATTR)
    oa = attr(ctx, rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR)
    ia.type, ia.pass_through = in_type, 0
    imem = rk.rknn_create_mem(ctx, ia.n_elems)
    omem = rk.rknn_create_mem(ctx, oa.size)
    assert imem and omem
    assert rk.rknn_set_io_mem(ctx, imem, ia) == 0
    assert rk.rknn_set_io_mem(ctx, omem, oa) == 0
    return imem, omem


def test_create_mem_is_a_real_memfd_mapping(ctx) -> None:
    mem = rk.rknn_create_mem(ctx, 10000)
    m = mem.contents
    assert m.size == 10000 and m.offset == 0 and m.flags == rk.RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE
    assert m.phys_addr != 0 and m.virt_addr != 0
    assert os.readlink(f"/proc/self/fd/{m.fd}").startswith("/memfd:rknnrt")
    view(mem)[:5] = [1, 2, 3, 4, 5]
    # the descriptor maps the same pages: the application can share them
    with mmap.mmap(m.fd, 10000) as other:
        assert other[:5] == bytes([1, 2, 3, 4, 5])
    assert rk.rknn_destroy_mem(ctx, mem) == 0
    with pytest.raises(OSError):
        os.fstat(m.fd)


def test_create_mem_errors(ctx, rknn_log) -> None:
    assert not rk.rknn_create_mem(ctx, 0)
    assert not rk.rknn_create_mem(0, 64)
    assert not rk.rknn_create_mem2(0, 64, 0)  # a context is needed without NO_CONTEXT
    assert not rk.rknn_create_mem2(ctx, 64, 0x40000)
    errors = rknn_log.take("E")
    assert len(errors) == 4
    assert re.search(r"rknn_create_mem: invalid size 0", errors[0])
    assert re.search(r"rknn_create_mem2: unknown alloc_flags bits 0x40000", errors[3])


def test_no_context_memory_and_double_free(ctx, rknn_log) -> None:
    mem = rk.rknn_create_mem2(0, 4096, NO_CTX | rk.RKNN_FLAG_MEMORY_NON_CACHEABLE)
    assert mem and mem.contents.size == 4096
    assert rk.rknn_destroy_mem(0, mem) == 0
    assert rk.rknn_destroy_mem(0, mem) == rk.RKNN_ERR_PARAM_INVALID
    other = rk.rknn_create_mem2(0, 4096, NO_CTX)
    assert rk.rknn_destroy_mem(ctx, other) == 0  # any context may free it
    owned = rk.rknn_create_mem(ctx, 64)
    assert rk.rknn_destroy_mem(0, owned) == rk.RKNN_ERR_CTX_INVALID
    assert rk.rknn_destroy_mem(ctx, owned) == 0
    assert any(
        "not a live rknn_tensor_mem (destroyed or never made)" in line
        for line in rknn_log.take("E")
    )


def test_from_fd_of_our_memory_and_of_the_applications(ctx) -> None:
    mem = rk.rknn_create_mem(ctx, 8192)
    view(mem)[4096:4100] = [9, 8, 7, 6]
    window = rk.rknn_create_mem_from_fd(ctx, mem.contents.fd, mem.contents.virt_addr, 100, 4096)
    assert window and window.contents.flags == rk.RKNN_TENSOR_MEMORY_FLAGS_FROM_FD
    assert list(view(window)[:4]) == [9, 8, 7, 6]
    assert not rk.rknn_create_mem_from_fd(ctx, mem.contents.fd, None, 8192, 1)  # past the end
    # the application's own descriptor
    fd = os.memfd_create("app")
    os.ftruncate(fd, 3 * 4096)
    os.pwrite(fd, b"hello", 4096 + 10)
    wrapped = rk.rknn_create_mem_from_fd(ctx, fd, None, 64, 4096 + 10)
    assert wrapped and wrapped.contents.fd == fd
    assert rk.rknn_destroy_mem(ctx, wrapped) == 0
    os.fstat(fd)  # still the application's: not closed by rknnrt
    os.close(fd)
    assert rk.rknn_destroy_mem(ctx, window) == 0
    assert rk.rknn_destroy_mem(ctx, mem) == 0


def test_from_phys_maps_back(ctx) -> None:
    mem = rk.rknn_create_mem(ctx, 4096)
    view(mem)[100] = 42
    alias = rk.rknn_create_mem_from_phys(ctx, mem.contents.phys_addr + 100, None, 16)
    assert alias and alias.contents.flags == rk.RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS
    assert view(alias)[0] == 42
    assert not rk.rknn_create_mem_from_phys(ctx, 0x1234, None, 16)  # unknown, no virt_addr
    own = np.arange(16, dtype=np.uint8)
    wrapped = rk.rknn_create_mem_from_phys(ctx, 0x1234, own.ctypes.data, 16)
    assert wrapped and list(view(wrapped)) == list(range(16))
    for m in (alias, wrapped, mem):
        assert rk.rknn_destroy_mem(ctx, m) == 0


def test_zero_copy_equals_general_api_bit_for_bit(make_ctx, default_model_bytes) -> None:
    image = default_input(seed=11)
    general = general_api(make_ctx(default_model_bytes), image)
    ctx = make_ctx(default_model_bytes)
    imem, omem = bind_zero_copy(ctx)
    view(imem)[:] = image.reshape(-1)
    run = rk.rknn_run_extend()
    assert rk.rknn_run(ctx, run) == 0 and run.frame_id == 1
    np.testing.assert_array_equal(view(omem, np.float32), general)
    assert general.max() > 0.1


def test_zero_copy_input_layouts_and_types(make_ctx, default_model_bytes, reference) -> None:
    ctx = make_ctx(default_model_bytes)
    image = default_input(seed=12)
    expected = reference(image)
    oa = attr(ctx, rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR)
    omem = rk.rknn_create_mem(ctx, oa.size)
    assert rk.rknn_set_io_mem(ctx, omem, oa) == 0
    ia = attr(ctx, rk.RKNN_QUERY_INPUT_ATTR)
    for dtype, code, fmt, data in (
        (np.float32, rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NCHW, image.transpose(0, 3, 1, 2)),
        (np.float16, rk.RKNN_TENSOR_FLOAT16, rk.RKNN_TENSOR_NHWC, image),
    ):
        ia.type, ia.fmt = code, fmt
        mem = rk.rknn_create_mem(ctx, image.size * np.dtype(dtype).itemsize)
        view(mem, dtype)[:] = np.ascontiguousarray(data).reshape(-1)
        assert rk.rknn_set_io_mem(ctx, mem, ia) == 0
        assert rk.rknn_run(ctx, None) == 0
        np.testing.assert_allclose(view(omem, np.float32), expected[0], rtol=1e-4, atol=1e-6)


def test_zero_copy_outputs_in_native_layouts(make_ctx, convert, default_onnx) -> None:
    """A 4-D output stored as NC1HWC2 (C2 per platform and dtype), NHWC and NCHW."""
    from rknnrt.toolkit import RKNN

    rknn = RKNN()
    rknn.config(target_platform="rk3566", float_dtype="float32")
    rknn.load_onnx(default_onnx, outputs=["cat3"])
    assert rknn.build(do_quantization=False) == 0
    ctx = make_ctx(rknn.model_bytes())
    image = default_input(seed=13).astype(np.float32)
    ia = attr(ctx, rk.RKNN_QUERY_INPUT_ATTR)
    imem = rk.rknn_create_mem(ctx, ia.size)
    view(imem, np.float32)[:] = image.reshape(-1)
    assert rk.rknn_set_io_mem(ctx, imem, ia) == 0
    results = {}
    for cmd in (rk.RKNN_QUERY_OUTPUT_ATTR, rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR,
                rk.RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR):  # fmt: skip
        oa = attr(ctx, cmd)
        mem = rk.rknn_create_mem(ctx, oa.size)
        assert rk.rknn_set_io_mem(ctx, mem, oa) == 0
        assert rk.rknn_run(ctx, None) == 0
        dims = list(oa.dims[: oa.n_dims])
        results[rk.get_format_string(oa.fmt)] = view(mem, np.float32).reshape(dims).copy()
    nchw = results["NCHW"]
    assert nchw.shape == (1, 32, 16, 16)
    assert results["NC1HWC2"].shape == (1, 16, 16, 16, 2)  # float32 on rk3566: C2 = 8 B / 4 B
    np.testing.assert_array_equal(results["NHWC"], nchw.transpose(0, 2, 3, 1))
    c1 = results["NC1HWC2"]
    np.testing.assert_array_equal(c1.transpose(0, 1, 4, 2, 3).reshape(1, 32, 16, 16), nchw)
    # a buffer one byte too small is refused with the expected size in the log
    oa = attr(ctx, rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR)
    small = rk.rknn_create_mem(ctx, oa.size - 1)
    assert rk.rknn_set_io_mem(ctx, small, oa) == rk.RKNN_ERR_PARAM_INVALID


def test_set_io_mem_checks(ctx, rknn_log) -> None:
    ia = attr(ctx, rk.RKNN_QUERY_NATIVE_INPUT_ATTR)
    small = rk.rknn_create_mem(ctx, ia.size_with_stride - 1)
    assert rk.rknn_set_io_mem(ctx, small, ia) == rk.RKNN_ERR_PARAM_INVALID
    line = rknn_log.take("E")[-1]
    assert re.search(rf"memory size must be: {ia.size_with_stride}, but is: "
                     rf"{ia.size_with_stride - 1}", line)  # fmt: skip
    bad = rk.rknn_tensor_attr()
    bad.name = b"no_such_tensor"
    assert rk.rknn_set_io_mem(ctx, small, bad) == rk.RKNN_ERR_PARAM_INVALID
    assert "Unknown tensor name: 'no_such_tensor'" in rknn_log.take("E")[-1]
    ia.type = rk.RKNN_TENSOR_INT16
    assert rk.rknn_set_io_mem(ctx, small, ia) == rk.RKNN_ERR_PARAM_INVALID
    assert rk.rknn_set_io_mem(ctx, None, ia) == rk.RKNN_ERR_PARAM_INVALID


def test_destroyed_bound_memory_is_detected(make_ctx, default_model_bytes, rknn_log) -> None:
    ctx = make_ctx(default_model_bytes)
    imem, _ = bind_zero_copy(ctx)
    assert rk.rknn_run(ctx, None) == 0
    assert rk.rknn_destroy_mem(ctx, imem) == 0
    assert rk.rknn_run(ctx, None) == rk.RKNN_ERR_FAIL
    assert "memory was destroyed while still bound" in rknn_log.take("E")[-1]


# ---- cache coherency ------------------------------------------------------------------------
@pytest.mark.parametrize("sync", [False, True])
def test_input_without_flush_computes_on_old_data(make_ctx, default_model_bytes, rknn_log, sync):
    ctx = make_ctx(default_model_bytes, rk.RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE)
    reference_ctx = make_ctx(default_model_bytes)
    old, new = default_input(seed=21), default_input(seed=22)
    imem, omem = bind_zero_copy(ctx)
    view(imem)[:] = old.reshape(-1)
    assert rk.rknn_mem_sync(ctx, imem, rk.RKNN_MEMORY_SYNC_TO_DEVICE) == 0
    assert rk.rknn_run(ctx, None) == 0
    np.testing.assert_array_equal(view(omem, np.float32), general_api(reference_ctx, old))
    rknn_log.clear()
    view(imem)[:] = new.reshape(-1)  # CPU writes...
    if sync:
        assert rk.rknn_mem_sync(ctx, imem, rk.RKNN_MEMORY_SYNC_TO_DEVICE) == 0
    assert rk.rknn_run(ctx, None) == 0
    expected = general_api(reference_ctx, new if sync else old)
    np.testing.assert_array_equal(view(omem, np.float32), expected)
    warnings = rknn_log.take("W")
    if sync:
        assert warnings == []
    else:
        assert len(warnings) == 1
        assert re.search(r"input 0 \(images\) \(memory fd \d+ at 0x[0-9a-f]+\) has CPU writes "
                         r"the NPU has not seen", warnings[0])  # fmt: skip


@pytest.mark.parametrize("sync", [False, True])
def test_output_without_invalidate_reads_stale(make_ctx, default_model_bytes, rknn_log, sync):
    ctx = make_ctx(default_model_bytes, rk.RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE)
    reference_ctx = make_ctx(default_model_bytes)
    imem, omem = bind_zero_copy(ctx)
    view(omem)[:] = 0
    assert rk.rknn_mem_sync(ctx, omem, rk.RKNN_MEMORY_SYNC_TO_DEVICE) == 0
    image = default_input(seed=23)
    view(imem)[:] = image.reshape(-1)
    assert rk.rknn_run(ctx, None) == 0
    if sync:
        assert rk.rknn_mem_sync(ctx, omem, rk.RKNN_MEMORY_SYNC_FROM_DEVICE) == 0
        np.testing.assert_array_equal(view(omem, np.float32), general_api(reference_ctx, image))
    else:
        assert not view(omem).any()  # the CPU still sees the zeros it wrote
    rknn_log.clear()
    assert rk.rknn_run(ctx, None) == 0  # the next run notices results nobody synced
    warnings = rknn_log.take("W")
    assert len(warnings) == (0 if sync else 1)
    if not sync:
        assert "output 0 (probs)" in warnings[0] and "SYNC_FROM_DEVICE" in warnings[0]


def test_cache_model_switch_gives_one_view(make_ctx, default_model_bytes, monkeypatch) -> None:
    monkeypatch.setenv("RKNNRT_CACHE_MODEL", "0")
    ctx = make_ctx(default_model_bytes, rk.RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE)
    reference_ctx = make_ctx(default_model_bytes)
    imem, omem = bind_zero_copy(ctx)
    image = default_input(seed=24)
    view(imem)[:] = image.reshape(-1)  # no sync needed: one view
    assert rk.rknn_run(ctx, None) == 0
    np.testing.assert_array_equal(view(omem, np.float32), general_api(reference_ctx, image))


def test_non_cacheable_memory_needs_no_sync(make_ctx, default_model_bytes) -> None:
    ctx = make_ctx(default_model_bytes, rk.RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE)
    reference_ctx = make_ctx(default_model_bytes)
    ia = attr(ctx, rk.RKNN_QUERY_NATIVE_INPUT_ATTR)
    ia.type = rk.RKNN_TENSOR_UINT8
    imem = rk.rknn_create_mem2(ctx, ia.n_elems, rk.RKNN_FLAG_MEMORY_NON_CACHEABLE)
    assert rk.rknn_set_io_mem(ctx, imem, ia) == 0
    oa = attr(ctx, rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR)
    omem = rk.rknn_create_mem(ctx, oa.size)
    assert rk.rknn_set_io_mem(ctx, omem, oa) == 0
    image = default_input(seed=25)
    view(imem)[:] = image.reshape(-1)
    assert rk.rknn_run(ctx, None) == 0
    np.testing.assert_array_equal(view(omem, np.float32), general_api(reference_ctx, image))


def test_mem_sync_modes(ctx) -> None:
    mem = rk.rknn_create_mem(ctx, 64)
    for mode in (rk.RKNN_MEMORY_SYNC_TO_DEVICE, rk.RKNN_MEMORY_SYNC_FROM_DEVICE,
                 rk.RKNN_MEMORY_SYNC_BIDIRECTIONAL):  # fmt: skip
        assert rk.rknn_mem_sync(ctx, mem, mode) == 0
        assert rk.rknn_mem_sync(0, mem, mode) == 0  # ctx may be NULL (UG 5.10)
    assert rk.rknn_mem_sync(ctx, mem, 4) == rk.RKNN_ERR_PARAM_INVALID
    assert rk.rknn_mem_sync(ctx, None, 1) == rk.RKNN_ERR_PARAM_INVALID


def test_zero_copy_only_platform_and_device_mem_info(make_ctx, convert, default_onnx,
                                                     reference, rknn_log) -> None:  # fmt: skip
    """RK2118: no general API, but zero-copy runs; DEVICE_MEM_INFO describes the model buffer."""
    from test_init_flags import mem_size  # noqa: PLC0415

    model = convert(
        default_onnx,
        target_platform="rk2118",
        mean_values=[[123.675, 116.28, 103.53]],
        std_values=[[58.395, 57.12, 57.375]],
    )
    ctx = make_ctx(model)
    info = rk.rknn_tensor_mem()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_DEVICE_MEM_INFO, ctypes.byref(info),
                         ctypes.sizeof(info)) == 0  # fmt: skip
    assert info.size == mem_size(ctx).total_weight_size and info.fd > 0 and info.phys_addr
    assert os.readlink(f"/proc/self/fd/{info.fd}").startswith("/memfd:rknnrt")
    image = default_input(seed=31)
    inputs = (rk.rknn_input * 1)()
    inputs[0].buf, inputs[0].size = image.ctypes.data, image.nbytes
    assert rk.rknn_inputs_set(ctx, 1, inputs) == rk.RKNN_ERR_FAIL
    assert "rknn_inputs_set is not supported on rk2118" in rknn_log.take("E")[-1]
    imem, omem = bind_zero_copy(ctx)
    view(imem)[:] = image.reshape(-1)
    assert rk.rknn_run(ctx, None) == 0
    np.testing.assert_allclose(view(omem, np.float32), reference(image)[0], rtol=1e-4, atol=1e-6)
    assert not rk.rknn_create_mem_from_fd(ctx, imem.contents.fd, None, 16, 0)  # not on RK2118


def test_a_buffer_filled_through_its_descriptor_holds_the_bytes(monkeypatch) -> None:
    """Buffer.fill (the weights at rknn_init): our memfd is written through the descriptor,
    which its mapping then reads; a buffer with a separate device view gets both copies."""
    from rknnrt.core.io import memory

    data = np.random.default_rng(5).integers(0, 256, 3 * mmap.PAGESIZE + 17, np.uint8)
    writes: list[int] = []
    pwrite = os.pwrite
    monkeypatch.setattr(memory.os, "pwrite", lambda *a: writes.append(a[2]) or pwrite(*a))
    buf = memory.Buffer(data.size + 5, cacheable=False)
    buf.fill(memoryview(data))
    assert writes and writes[0] == 0  # through the descriptor, not the mapping
    assert buf.cpu[: data.size].tobytes() == data.tobytes() and not buf.cpu[data.size :].any()
    with open(f"/proc/self/fd/{buf.fd}", "rb") as f:
        assert f.read(data.size) == data.tobytes()
    monkeypatch.setenv("RKNNRT_CACHE_MODEL", "1")
    two = memory.Buffer(data.size, cacheable=True)
    assert two.two_views
    two.fill(memoryview(data))
    assert two.cpu.tobytes() == two.device.tobytes() == data.tobytes()
    with pytest.raises(ValueError):
        buf.fill(memoryview(np.zeros(data.size + 6, np.uint8)))
    buf.free()
