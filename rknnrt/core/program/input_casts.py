"""Input (and float16 output) conversions through onnxruntime's vectorised kernels, not numpy's.

float32 -> float16 (a float16 model's input): numpy converts element by element, 0.4 ms for a
1x3x224x224 input (6-8 % of a float16 SqueezeNet or ShuffleNet run); onnxruntime's Cast takes
0.02 ms. Both round to nearest even and agree bit for bit on every float32 that is not a NaN
(checked over every 7th float32 bit pattern); onnxruntime writes every NaN as the canonical
quiet NaN where numpy keeps its payload.

float32 -> int8 (an int8 model's input, model/numerics.quantize: float32 division, half to
even, + zp, saturation): numpy's divide, rint, add, clip and cast are five passes (0.08 ms,
1x3x224x224); onnxruntime's QuantizeLinear divides, rounds half to even and saturates in one
(tests/perf: the same int8 values, ties, infinities and out-of-range values included).
numpy's cast of a NaN is undefined, onnxruntime's another value.

float16 -> float32 (a float16 program's output asked as float32, core/io/plans.py): exact either
way, but numpy's is element by element too (2.1 ms for 1x84x8400, onnxruntime's 0.1 ms).

So an array holding a NaN keeps numpy's conversion, and stored bits stay what they were. Small
arrays keep numpy's too (a session call costs more than it saves).

Where rknnrt's compiled kernel library is built (sessions/kernels: inputcast.c), the two input
conversions run there instead, called directly: one pass that converts and looks for NaN at
once (`in_one_pass`; the same values, tests/perf/test_input_casts.py). The NaN pre-pass and the
session call had taken 0.17 ms for a 1x3x224x224 float32 input read cold after a run, the one
pass takes 0.065 ms (float16: 0.145 -> 0.054).
"""

from __future__ import annotations

import threading

import numpy as np

from ...sessions import factory, kernels, policies
from .. import switches
from ..lazy_imports import onnx

MIN_ELEMENTS = 4096
_lock = threading.Lock()
_sessions: dict[str, object] = {}  # "cast", "widen" and "quantize", made on first use
_compiled: list = []  # [the kernel library's direct calls, or None where it cannot be built]


def _library():
    """The kernel library's direct calls, looked up once per process (None: no library)."""
    if not _compiled:
        try:
            found = kernels.direct_calls(switches.cache_root())
        except (kernels.KernelsUnavailable, OSError):  # (dw_kernel's W line says why, once;
            found = None  # OSError: a cached file the loader refuses)
        with _lock:
            if not _compiled:
                _compiled.append(found)
    return _compiled[0]


def in_one_pass(src: np.ndarray, out: np.ndarray, scale: float | None, zp: int | None) -> bool:
    """out[...] = float32 `src` quantised (`scale` and `zp` given: out int8 or uint8, as
    model/numerics.quantize) or rounded to float16 (out float16), in one pass of the compiled
    kernel; False where that does not apply (no library, other types or sizes, or a NaN in
    `src`: out is then partly written) and the caller converts."""
    if src.dtype != np.float32 or src.size != out.size or not out.flags.c_contiguous or \
            not out.flags.writeable:  # fmt: skip
        return False
    quantize = scale is not None
    if quantize and out.dtype not in (np.int8, np.uint8) or \
            not quantize and out.dtype != np.float16:  # fmt: skip
        return False
    library = _library()
    if library is None:
        return False
    src = np.ascontiguousarray(src)
    if quantize:
        failed = library.rknnrt_quantize_f32(_address(src), src.size, scale, int(zp),
                                             int(out.dtype == np.int8), _address(out))  # fmt: skip
    else:
        failed = library.rknnrt_half_f32(_address(src), src.size, _address(out))
    return not failed


def _session(kind: str):
    with _lock:
        if kind not in _sessions:
            h, tp = onnx.helper, onnx.TensorProto
            if kind == "cast":
                node = h.make_node("Cast", ["x"], ["y"], to=tp.FLOAT16)
                inputs = [h.make_tensor_value_info("x", tp.FLOAT, None)]
                output = h.make_tensor_value_info("y", tp.FLOAT16, None)
            elif kind == "widen":
                node = h.make_node("Cast", ["x"], ["y"], to=tp.FLOAT)
                inputs = [h.make_tensor_value_info("x", tp.FLOAT16, None)]
                output = h.make_tensor_value_info("y", tp.FLOAT, None)
            else:
                node = h.make_node("QuantizeLinear", ["x", "scale", "zp"], ["y"])
                inputs = [h.make_tensor_value_info("x", tp.FLOAT, None),
                          h.make_tensor_value_info("scale", tp.FLOAT, []),
                          h.make_tensor_value_info("zp", tp.INT8, [])]  # fmt: skip
                output = h.make_tensor_value_info("y", tp.INT8, None)
            graph = h.make_graph([node], kind, inputs, [output])
            model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
            _sessions[kind] = factory.create(model, policies.HELPER)
        return _sessions[kind]


def fits(src: np.ndarray, out: np.ndarray) -> bool:
    """Whether onnxruntime may convert `src` into `out` (float16 or int8): float32 data with
    no NaN, large enough to be worth a session call, and an output it can write in place."""
    return (src.size >= MIN_ELEMENTS and src.size == out.size and src.dtype == np.float32
            and out.dtype in (np.float16, np.int8) and out.flags.c_contiguous
            and src.flags.aligned and not np.isnan(src.max()))  # fmt: skip


_HALF_MAGNITUDE, _HALF_INF = 0x7FFF, 0x7C00


def widen_fits(src: np.ndarray) -> bool:
    """Whether onnxruntime may widen float16 `src` to float32 (a float16 program's output asked
    as float32): large enough, C-contiguous and without NaN (numpy keeps a signalling NaN's
    bits, the CPU's conversion quiets it). Every other float16 value widens exactly either way,
    and numpy's widening is element by element (2.1 ms for YOLOv8n's 1x84x8400 output, 11 ms
    for DeepLabV3's 1x21x513x513; onnxruntime's: 0.1 ms, 0.8 ms)."""
    return (src.size >= MIN_ELEMENTS and src.dtype == np.float16 and src.flags.c_contiguous
            and int(np.max(src.view(np.uint16) & _HALF_MAGNITUDE)) <= _HALF_INF)  # fmt: skip


def to_float32(src: np.ndarray) -> np.ndarray:
    """A new float32 array of float16 `src`'s values, by onnxruntime (`widen_fits`)."""
    out = np.empty(src.shape, np.float32)
    session = _session("widen")
    binding = session.io_binding()
    binding.bind_input("x", "cpu", 0, np.float16, list(src.shape), _address(src))
    binding.bind_output("y", "cpu", 0, np.float32, list(out.shape), _address(out))
    session.run_with_iobinding(binding)
    return out


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _run(kind: str, src: np.ndarray, out: np.ndarray, extra: dict[str, np.ndarray]) -> None:
    src = np.ascontiguousarray(src).reshape(out.shape)
    session = _session(kind)
    binding = session.io_binding()
    binding.bind_input("x", "cpu", 0, np.float32, list(src.shape), _address(src))
    for name, value in extra.items():
        binding.bind_cpu_input(name, value)
    binding.bind_output("y", "cpu", 0, out.dtype, list(out.shape), _address(out))
    session.run_with_iobinding(binding)


def to_float16(src: np.ndarray, out: np.ndarray) -> None:
    """out[...] = src rounded to float16 (out float16, `fits`)."""
    _run("cast", src, out, {})


def quantize_int8(src: np.ndarray, scale: float, zp: int, out: np.ndarray) -> None:
    """out[...] = numerics.quantize(src, scale, zp) by onnxruntime (out int8, `fits`)."""
    _run("quantize", src, out, {"scale": np.array(scale, np.float32), "zp": np.array(zp, np.int8)})
