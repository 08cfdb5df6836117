"""Every rknn_init flag, and the vendor document's three memory examples, in Python."""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from test_memory_calls import attr, general_api, view

import rknnrt as rk
from rknnrt.core import registry
from rknnrt.toolkit import RKNN
from rknnrt.toolkit.samples import default_input, default_model

NO_CTX = rk.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT


def mem_size(ctx) -> rk.rknn_mem_size:
    m = rk.rknn_mem_size()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_MEM_SIZE, ctypes.byref(m), ctypes.sizeof(m)) == 0
    return m


def bind_outside(ctx, internal=None):
    """Give a MEM_ALLOC_OUTSIDE context its weight, internal and IO memory; returns the
    input and output memory."""
    sizes = mem_size(ctx)
    weights = rk.rknn_create_mem(ctx, sizes.total_weight_size)
    assert rk.rknn_set_weight_mem(ctx, weights) == 0
    if internal is None:
        internal = rk.rknn_create_mem(ctx, sizes.total_internal_size)
    assert rk.rknn_set_internal_mem(ctx, internal) == 0
    ia = attr(ctx, rk.RKNN_QUERY_NATIVE_INPUT_ATTR)
    ia.type = rk.RKNN_TENSOR_UINT8
    imem = rk.rknn_create_mem(ctx, ia.n_elems)
    oa = attr(ctx, rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR)
    omem = rk.rknn_create_mem(ctx, oa.size)
    assert rk.rknn_set_io_mem(ctx, imem, ia) == 0 and rk.rknn_set_io_mem(ctx, omem, oa) == 0
    return imem, omem


@pytest.fixture(scope="module")
def second_model(convert) -> bytes:
    """A different model (its own weights and internal size) to run after the default one:
    Conv 3->8 -> Relu -> GlobalAveragePool -> Flatten, [1,8] out."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.RandomState(7)
    nodes = [
        helper.make_node("Conv", ["images", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "second",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 8])],
        [numpy_helper.from_array(rng.randn(8, 3, 3, 3).astype(np.float32), "w"),
         numpy_helper.from_array(rng.randn(8).astype(np.float32), "b")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return convert(model, mean_values=[[0, 0, 0]], std_values=[[255, 255, 255]])


# ---- the vendor document's examples ---------------------------------------------------------
def test_two_models_in_series_share_one_internal_buffer(make_ctx, default_model_bytes,
                                                        second_model) -> None:  # fmt: skip
    flag = rk.RKNN_FLAG_MEM_ALLOC_OUTSIDE
    a, b = make_ctx(default_model_bytes, flag), make_ctx(second_model, flag)
    size_a, size_b = mem_size(a).total_internal_size, mem_size(b).total_internal_size
    assert size_a != size_b
    shared = rk.rknn_create_mem(a, max(size_a, size_b))  # created once ...
    fd, virt = shared.contents.fd, shared.contents.virt_addr
    for_a = rk.rknn_create_mem_from_fd(a, fd, virt, size_a, 0)  # ... wrapped for each
    for_b = rk.rknn_create_mem_from_fd(b, fd, virt, size_b, 0)
    in_a, out_a = bind_outside(a, for_a)
    in_b, out_b = bind_outside(b, for_b)
    ref_a, ref_b = make_ctx(default_model_bytes), make_ctx(second_model)
    for seed in (1, 2):
        image = default_input(seed=seed)
        view(in_a)[:] = image.reshape(-1)
        view(in_b)[:] = image.reshape(-1)
        assert rk.rknn_run(a, None) == 0 and rk.rknn_run(b, None) == 0
        np.testing.assert_array_equal(view(out_a, np.float32), general_api(ref_a, image))
        np.testing.assert_array_equal(view(out_b, np.float32), general_api(ref_b, image))
    # each memory is destroyed on the context that made it (issue 11 item 10)
    assert rk.rknn_destroy_mem(a, for_b) == rk.RKNN_ERR_PARAM_INVALID
    for owner, m in ((a, for_a), (b, for_b), (a, shared)):
        assert rk.rknn_destroy_mem(owner, m) == 0


def test_weightless_model_shares_the_donors_weights(make_ctx, default_model_bytes,
                                                    rknn_log) -> None:  # fmt: skip
    rknn = RKNN()
    rknn.config(mean_values=[[123.675, 116.28, 103.53]], std_values=[[58.395, 57.12, 57.375]],
                remove_weight=True, float_dtype="float32")  # fmt: skip
    rknn.load_onnx(default_model())
    assert rknn.build(do_quantization=False) == 0
    weightless = rknn.model_bytes()
    assert len(weightless) < len(default_model_bytes) - 15000  # no weights inside
    donor = make_ctx(default_model_bytes)
    ext = rk.rknn_init_extend()
    ext.ctx = donor.value
    b = make_ctx(weightless, rk.RKNN_FLAG_SHARE_WEIGHT_MEM, ext)
    # not a copy
    assert registry.get(b.value).weights.array is registry.get(donor.value).weights.array
    image = default_input(seed=3)
    np.testing.assert_array_equal(general_api(b, image), general_api(donor, image))
    # refused: no donor, a donor with other weights, no flag
    other_ctx = make_ctx(_convert_plain(default_model(seed=9)))
    ext.ctx = other_ctx.value
    handle = rk.rknn_context()
    assert rk.rknn_init(handle, weightless, len(weightless), rk.RKNN_FLAG_SHARE_WEIGHT_MEM,
                        ext) == rk.RKNN_ERR_PARAM_INVALID  # fmt: skip
    assert "weights differ" in rknn_log.take("E")[-1]
    assert rk.rknn_init(handle, weightless, len(weightless), rk.RKNN_FLAG_SHARE_WEIGHT_MEM,
                        None) == rk.RKNN_ERR_PARAM_INVALID  # fmt: skip
    assert rk.rknn_init(handle, weightless, len(weightless), 0, None) == rk.RKNN_ERR_MODEL_INVALID
    assert "remove_weight=True" in rknn_log.take("E")[-1]


def _convert_plain(model) -> bytes:
    rknn = RKNN()
    rknn.config(mean_values=[[123.675, 116.28, 103.53]], std_values=[[58.395, 57.12, 57.375]],
                float_dtype="float32")  # fmt: skip
    rknn.load_onnx(model)
    assert rknn.build(do_quantization=False) == 0
    return rknn.model_bytes()


@pytest.mark.parametrize("by_fd", [False, True])
def test_model_buffer_zero_copy(default_model_bytes, make_ctx, by_fd) -> None:
    size = len(default_model_bytes)
    model_mem = rk.rknn_create_mem2(0, size + 128, NO_CTX)
    m = model_mem.contents
    view(model_mem)[128:] = np.frombuffer(default_model_bytes, np.uint8)
    ext = rk.rknn_init_extend()
    ext.real_model_offset, ext.real_model_size = 128, size
    ext.model_buffer_fd, ext.model_buffer_flags = m.fd, m.flags
    ctx = rk.rknn_context()
    model = None if by_fd else m.virt_addr + 128
    assert rk.rknn_init(ctx, model, size, rk.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, ext) == 0
    weights = registry.get(ctx.value).weights.array
    start = weights.__array_interface__["data"][0]
    assert m.virt_addr + 128 <= start < m.virt_addr + 128 + size  # read in place
    image = default_input(seed=5)
    expected = general_api(make_ctx(default_model_bytes), image)
    # in-place weights run through other onnxruntime kernels: equal up to float rounding
    np.testing.assert_allclose(general_api(ctx, image), expected, rtol=1e-6, atol=1e-7)
    # ... and really in place: changing the buffer's weights changes the result
    weights[:] = 0
    assert not np.allclose(general_api(ctx, image), expected)
    assert mem_size(ctx).total_dma_allocated_size < mem_size(make_ctx(default_model_bytes)) \
        .total_dma_allocated_size  # fmt: skip
    # the documented order: the model memory first, then the context
    assert rk.rknn_destroy_mem(ctx, model_mem) == 0
    assert rk.rknn_destroy(ctx) == 0


# ---- each flag --------------------------------------------------------------------------------
def test_mem_alloc_outside(make_ctx, default_model_bytes, rknn_log) -> None:
    ctx = make_ctx(default_model_bytes, rk.RKNN_FLAG_MEM_ALLOC_OUTSIDE)
    sizes = mem_size(ctx)
    assert sizes.total_weight_size == 15232 and sizes.total_internal_size == 196608
    assert sizes.total_dma_allocated_size < 60000  # no weight or internal memory of its own
    assert rk.rknn_run(ctx, None) == rk.RKNN_ERR_FAIL
    assert "call rknn_set_weight_mem" in rknn_log.take("E")[-1]
    small = rk.rknn_create_mem(ctx, sizes.total_weight_size - 1)
    assert rk.rknn_set_weight_mem(ctx, small) == rk.RKNN_ERR_PARAM_INVALID
    weights = rk.rknn_create_mem(ctx, sizes.total_weight_size)
    assert rk.rknn_set_weight_mem(ctx, weights) == 0
    assert rk.rknn_run(ctx, None) == rk.RKNN_ERR_FAIL
    assert "call rknn_set_internal_mem" in rknn_log.take("E")[-1]
    internal = rk.rknn_create_mem(ctx, sizes.total_internal_size)
    assert rk.rknn_set_internal_mem(ctx, internal) == 0
    assert rk.rknn_run(ctx, None) == rk.RKNN_ERR_FAIL
    assert "input(images) tensor not attached to memory" in rknn_log.take("E")[-1]
    inputs = (rk.rknn_input * 1)()
    assert rk.rknn_inputs_set(ctx, 1, inputs) == rk.RKNN_ERR_FAIL
    assert "RKNN_FLAG_MEM_ALLOC_OUTSIDE" in rknn_log.take("E")[-1]


def test_internal_alloc_outside_and_misplaced_calls(make_ctx, default_model_bytes,
                                                    rknn_log) -> None:  # fmt: skip
    plain = make_ctx(default_model_bytes)
    mem = rk.rknn_create_mem(plain, 1 << 18)
    assert rk.rknn_set_weight_mem(plain, mem) == rk.RKNN_ERR_FAIL
    assert rk.rknn_set_internal_mem(plain, mem) == rk.RKNN_ERR_FAIL
    ctx = make_ctx(default_model_bytes, rk.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE)
    image = default_input(seed=8)
    inputs = (rk.rknn_input * 1)()
    inputs[0].buf, inputs[0].size = image.ctypes.data, image.nbytes
    inputs[0].type, inputs[0].fmt = rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC
    assert rk.rknn_inputs_set(ctx, 1, inputs) == 0
    assert rk.rknn_run(ctx, None) == rk.RKNN_ERR_FAIL
    assert rk.rknn_set_internal_mem(ctx, mem) == 0
    np.testing.assert_array_equal(general_api(ctx, image), general_api(plain, image))


def test_collect_model_info_only(make_ctx, default_model_bytes) -> None:
    ctx = make_ctx(default_model_bytes, rk.RKNN_FLAG_COLLECT_MODEL_INFO_ONLY)
    sizes = mem_size(ctx)
    assert (sizes.total_weight_size, sizes.total_internal_size) == (15232, 196608)
    assert sizes.total_dma_allocated_size == 0
    assert rk.rknn_run(ctx, None) == rk.RKNN_ERR_FAIL


def test_collect_perf_gates_perf_detail(make_ctx, default_model_bytes, rknn_log) -> None:
    detail = rk.rknn_perf_detail()
    plain = make_ctx(default_model_bytes)
    general_api(plain, default_input())
    # without the flag a board answers success with an empty table (rknn-toolkit2#437)
    assert rk.rknn_query(plain, rk.RKNN_QUERY_PERF_DETAIL, ctypes.byref(detail),
                         ctypes.sizeof(detail)) == rk.RKNN_SUCC  # fmt: skip
    assert (detail.data_len, detail.perf_data) == (0, b"")
    assert not rknn_log.take("E")
    ctx = make_ctx(default_model_bytes, rk.RKNN_FLAG_COLLECT_PERF_MASK)
    general_api(ctx, default_input())
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_PERF_DETAIL, ctypes.byref(detail),
                         ctypes.sizeof(detail)) == 0  # fmt: skip
    text = ctypes.string_at(detail.perf_data, detail.data_len).decode()
    assert "Network Layer Information Table" in text
    assert "Total Operator Elapsed Per Frame Time(us):" in text


def test_sram_pool(make_ctx, convert, default_onnx, default_model_bytes, rknn_log) -> None:
    flag = rk.RKNN_FLAG_ENABLE_SRAM
    a = make_ctx(default_model_bytes, flag)
    sizes = mem_size(a)
    assert sizes.total_sram_size == 956 * 1024
    taken = 196608  # the whole internal plan fits
    assert sizes.free_sram_size == 956 * 1024 - taken
    assert registry.get(a.value).internal_dram_size() == 0
    b = make_ctx(default_model_bytes, flag)
    assert mem_size(b).free_sram_size == 956 * 1024 - 2 * taken
    shared = make_ctx(default_model_bytes, flag | rk.RKNN_FLAG_SHARE_SRAM)
    assert mem_size(shared).free_sram_size == 956 * 1024 - 2 * taken  # takes nothing new
    assert rk.rknn_destroy(b) == 0
    assert mem_size(a).free_sram_size == 956 * 1024 - taken
    handle = rk.rknn_context()
    model = default_model_bytes
    assert rk.rknn_init(handle, model, len(model), rk.RKNN_FLAG_SHARE_SRAM,
                        None) == rk.RKNN_ERR_PARAM_INVALID  # fmt: skip
    small_chip = make_ctx(convert(default_onnx, target_platform="rk3566"), flag)
    assert mem_size(small_chip).total_sram_size == 0
    assert any("has no NPU SRAM" in w for w in rknn_log.take("W"))


def test_gpu_fallback_is_recorded_and_shown(tmp_path, default_model_bytes, capsys) -> None:
    from rknnrt import cli

    path = tmp_path / "m.rknnrt"
    path.write_bytes(default_model_bytes)
    assert cli.main(["info", str(path), "--flag",
                     hex(rk.RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "init flags: RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU" in out
    assert re.search(r"placement: .*Conv x5 -> NPU, .*Softmax x1 -> NPU", out)


def test_process_priority(default_model_bytes, tmp_path) -> None:
    """DISABLE_PROC_HIGH_PRIORITY keeps the priority; without it rknn_init sets nice -19 when
    permitted. One process checks both, the flagged init first (the raise is not undone)."""
    path = tmp_path / "m.rknnrt"
    path.write_bytes(default_model_bytes)
    script = textwrap.dedent(f"""
        import ctypes, os
        import rknnrt as rk
        for flag in (rk.RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY, 0):
            before = os.getpriority(os.PRIO_PROCESS, 0)
            ctx = rk.rknn_context()
            assert rk.rknn_init(ctypes.byref(ctx), {str(path)!r}, 0, flag, None) == 0
            print(before, os.getpriority(os.PRIO_PROCESS, 0))
            rk.rknn_destroy(ctx)
    """)
    env = {k: v for k, v in os.environ.items() if k != "RKNNRT_KEEP_PRIORITY"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, check=True).stdout.split()  # fmt: skip
    flagged_before, flagged_after, before, after = (int(v) for v in out)
    assert flagged_after == flagged_before
    if os.geteuid() == 0:
        assert after == -19
    else:  # not permitted: unchanged, and init still succeeded
        assert after == before


def test_zero_copy_model_memory_destroyed_early_is_safe(default_model_bytes) -> None:
    """Destroying the model buffer before the context must not unmap the weights it reads."""
    size = len(default_model_bytes)
    mem = rk.rknn_create_mem2(0, size, NO_CTX)
    view(mem)[:] = np.frombuffer(default_model_bytes, np.uint8)
    ext = rk.rknn_init_extend(real_model_size=size, model_buffer_fd=mem.contents.fd)
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctx, mem.contents.virt_addr, size, rk.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY,
                        ext) == 0  # fmt: skip
    assert rk.rknn_destroy_mem(0, mem) == 0
    image = default_input(seed=41)
    assert general_api(ctx, image).shape == (10,)  # runs on still-mapped pages, no fault
    assert rk.rknn_destroy(ctx) == 0
