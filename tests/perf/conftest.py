"""Fixtures of the speed rewrites' tests."""

from __future__ import annotations

import ctypes

import pytest

from rknnrt.core import switches
from rknnrt.sessions import kernels


@pytest.fixture(scope="module")
def library():
    """(path, ctypes handle) of rknnrt's compiled kernel library of this source, built once into
    the cache folder (later runs find it); the handle is the object onnxruntime registers, so
    its path setters (rknnrt_dw_max_level, rknnrt_f16round_max_level, rknnrt_affine_max_level,
    rknnrt_qconv_max_level, rknnrt_chanmul_max_level, rknnrt_inputcast_max_level,
    rknnrt_f16table_max_level, rknnrt_bytemap_max_level) reach the sessions. All are back at
    their widest afterwards."""
    path = kernels.library(switches.cache_root())
    handle = ctypes.CDLL(str(path))
    yield path, handle
    handle.rknnrt_dw_max_level(2)
    handle.rknnrt_f16round_max_level(2)
    handle.rknnrt_affine_max_level(1)
    handle.rknnrt_qconv_max_level(2)
    handle.rknnrt_chanmul_max_level(2)
    handle.rknnrt_inputcast_max_level(2)
    handle.rknnrt_f16table_max_level(2)
    handle.rknnrt_bytemap_max_level(1)


def kernel_session(library, model, threads: int = 1):
    """An onnxruntime session of `model` (a ModelProto using the library's ops) with the
    library registered, `threads` intra-op threads."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.register_custom_ops_library(str(library[0]))
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])  # fmt: skip


_INT8_FILES: dict[tuple[str, int], bytes] = {}


def int8_network(name: str, folder, seed: int = 1) -> tuple[str, object]:
    """(the path of tools/real_arch's `name` at test size converted to int8 for rk3588 by
    rknnrt's toolkit in `folder`, calibrated on two uniform samples of a RandomState(seed),
    and that generator, for the caller's inputs). A network is converted once per process
    (the conversion is deterministic): later calls write the same bytes."""
    import numpy as np

    from tools.real_arch import catalog

    shape = catalog.input_shape(name, test=True)
    rng = np.random.RandomState(seed)
    calib = [[rng.rand(*shape).astype(np.float32)] for _ in range(2)]
    if (name, seed) not in _INT8_FILES:
        _INT8_FILES[name, seed] = _converted_int8(catalog.build(name, test=True), calib, folder)
    path = folder / f"{name}.rknn"
    path.write_bytes(_INT8_FILES[name, seed])
    return str(path), rng


def _converted_int8(model, calib: list, folder) -> bytes:
    from rknnrt.toolkit import RKNN

    rknn = RKNN()
    rknn.config(target_platform="rk3588")
    rknn.load_onnx(model)
    assert rknn.build(do_quantization=True, dataset=calib) == 0
    scratch = folder / "converted.rknn"
    assert rknn.export_rknn(str(scratch)) == 0
    data = scratch.read_bytes()
    scratch.unlink()
    return data


def infer_lite(path: str, inputs: list) -> list[list]:
    """The outputs of the `.rknn` at `path` for each input (one RKNNLite, NCHW inputs)."""
    from rknnrt.lite import RKNNLite

    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    try:
        return [runtime.inference([x], data_format="nchw") for x in inputs]
    finally:
        runtime.release()


def every_byte(dtype, dims: list[int]):
    """A `dtype` (uint8 or int8) array of `dims` holding every byte value in every position
    class (mod 16, mod the channel count), in a fixed order."""
    import numpy as np

    count = int(np.prod(dims))
    return (np.arange(count) * 37 % 256).astype(np.uint8).view(dtype).reshape(dims)


def one_input_model(nodes: list, x_type: int, dims: list[int], outputs: list,
                    inits: list) -> bytes:  # fmt: skip
    """The serialised opset-17 model of `nodes` reading graph input "x" (`x_type`, `dims`)."""
    from onnx import helper

    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", x_type, dims)],
                              outputs, inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def outputs_on_and_off(monkeypatch, switch, path: str, inputs: list) -> dict[str, list]:
    """{"1": ..., "0": ...}: the first output of the `.rknn` at `path` for each NCHW input, as
    float32 arrays, loaded with `switch` on and then off."""
    import numpy as np

    from rknnrt.lite import RKNNLite

    outs = {}
    for on in ("1", "0"):
        monkeypatch.setenv(switch.name, on)
        runtime = RKNNLite()
        assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
        try:
            outs[on] = [np.asarray(runtime.inference([x], data_format=["nchw"])[0])
                        for x in inputs]  # fmt: skip
        finally:
            runtime.release()
    return outs


def assert_switch_and_missing_compiler_keep(monkeypatch, tmp_path, capsys, switch, rewrite,
                                            graph: bytes) -> None:  # fmt: skip
    """`rewrite(graph, {})` keeps `graph` with `switch` at 0, and with it at 1 where no compiler
    can build the kernel library (nothing cached in `tmp_path`), after one W line naming why."""
    from rknnrt.core.program import dw_kernel

    monkeypatch.setenv(switch.name, "0")
    assert rewrite(graph, {})[0] is graph
    monkeypatch.setenv(switch.name, "1")
    monkeypatch.setenv(switches.CACHE_DIR.name, str(tmp_path))  # nothing cached there
    monkeypatch.setattr(kernels, "compiler", lambda: None)
    monkeypatch.setattr(dw_kernel, "_warned", False)
    assert rewrite(graph, {})[0] is graph
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("W RKNN:")]
    assert len(lines) == 1 and "no C compiler" in lines[0], lines


def programs_opened(monkeypatch) -> list[list[str]]:
    """A list that gets, per program session opened from now on (whole.open_program), its
    graph's op types in order."""
    import onnx

    from rknnrt.core.program import whole

    seen: list[list[str]] = []
    real = whole.open_program

    def spy(graph, *args, **kwargs):
        seen.append([n.op_type for n in onnx.load_model_from_string(bytes(graph)).graph.node])
        return real(graph, *args, **kwargs)

    monkeypatch.setattr(whole, "open_program", spy)
    return seen
