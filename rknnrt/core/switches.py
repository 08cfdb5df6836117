"""Every environment variable the runtime reads, in one table, and the one reader of each.

Each is read where its value is needed (a call that reads it says when); nothing else in
rknnrt/core, rknnrt/api or rknnrt/lite.py reads os.environ, and nothing in rknnrt writes it.
Code of the package that must change a switch for a while (the evaluation's thread count, the
`perf --host` run) uses `override`, which every reader here sees and which leaves os.environ alone.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..model import targets


@dataclass(frozen=True)
class Switch:
    name: str
    default: str
    meaning: str


LOG_LEVEL = Switch(
    "RKNN_LOG_LEVEL", "0",
    "the vendor's log level (read on every log line): 1 timing, 3 information, 4 the per-layer "
    "table after each run, 5 debug; errors and warnings always print; malformed means 0",
)  # fmt: skip
NUM_THREADS = Switch(
    "RKNNRT_NUM_THREADS", "",
    "onnxruntime intra-op threads of a program made at rknn_init (and of PERF_DETAIL's "
    "profiler); unset or not a number: onnxruntime's default",
)  # fmt: skip
CACHE_MODEL = Switch(
    "RKNNRT_CACHE_MODEL", "1",
    "0 turns the two-view cache-coherency model of cacheable memory off (read per allocation)",
)  # fmt: skip
KEEP_PRIORITY = Switch(
    "RKNNRT_KEEP_PRIORITY", "0",
    "1 keeps the process priority (the vendor raises it to nice -19 at the first rknn_init)",
)  # fmt: skip
PLATFORM = Switch(
    "RKNNRT_PLATFORM", targets.DEFAULT_PLATFORM,
    "the SoC the matmul API emulates (read at rknn_matmul_create and by the B layout helpers)",
)  # fmt: skip
CALL_WAIT_MS = Switch(
    "RKNNRT_CALL_WAIT_MS", "60000",
    "how long a call waits for another thread's call on the same context to end before "
    "RKNN_ERR_TIMEOUT (calls with their own timeout_ms > 0 use that); read when a call waits",
)  # fmt: skip
PERF_HOST = Switch(
    "RKNNRT_PERF_HOST", "0",
    "1: Time(us) of PERF_DETAIL and RKNN_QUERY_PERF_RUN report this PC's times instead of the "
    "estimated board times (read at each query; docs/performance.md)",
)  # fmt: skip
FP16_BLOCKED = Switch(
    "RKNNRT_FP16_BLOCKED", "1",
    "0 runs a float16 program's roundings where the toolkit wrote them instead of inside "
    "onnxruntime's blocked layout (core/program/fp16_layout.py: same outputs, slower; read at "
    "rknn_init)",
)  # fmt: skip
MEMORY_BUDGET_MB = Switch(
    "RKNNRT_MEMORY_BUDGET_MB", "8192",
    "the most memory one model's tensors may need (the sum of every tensor's size at the "
    "largest input shapes, without reuse); a model that needs more fails rknn_init with "
    "RKNN_ERR_MALLOC_FAIL (read at rknn_init; 0 or malformed: the default)",
)  # fmt: skip
RUN_TIMEOUT_MS = Switch(
    "RKNNRT_RUN_TIMEOUT_MS", "600000",
    "the longest one inference may compute: a longer one is cancelled and its rknn_run "
    "returns RKNN_ERR_TIMEOUT (read at each run; 0 or malformed: the default)",
)  # fmt: skip
INT8_DEPTHWISE = Switch(
    "RKNNRT_INT8_DEPTHWISE", "1",
    "0 leaves an int8 program's depthwise convs with per-channel weight zero points to "
    "onnxruntime's slow QLinearConv path (core/program/int8_depthwise.py: same outputs; read at "
    "rknn_init)",
)  # fmt: skip
INT8_DW_KERNEL = Switch(
    "RKNNRT_INT8_DW_KERNEL", "1",
    "0 runs an int8 program's 2-D depthwise convs (int8_depthwise's, and int8_islands' "
    "float-output ones) as exact float convs instead of on rknnrt's compiled int8 kernel (a C "
    "onnxruntime custom-op library built on first use and kept in the cache folder: "
    "core/program/dw_kernel.py, rknnrt/sessions/kernels; same outputs; read at rknn_init)",
)  # fmt: skip
FP16_ROUND_KERNEL = Switch(
    "RKNNRT_FP16_ROUND_KERNEL", "1",
    "0 runs a program's float16 roundings as onnxruntime's Cast pairs instead of one pass of "
    "rknnrt's compiled kernel (core/program/fp16_round.py; same values; read at rknn_init)",
)  # fmt: skip
FP16_BLOCKED_OPS = Switch(
    "RKNNRT_FP16_BLOCKED_OPS", "1",
    "0 keeps a float16 program's global average pools on their plain inputs, and their "
    "squeeze-and-excitation multiplies out of onnxruntime's blocked layout, instead of running "
    "both blocked on rknnrt's compiled kernels (core/program/fp16_blocked_ops.py; same values; "
    "read at rknn_init)",
)  # fmt: skip
INT8_AFFINE_KERNEL = Switch(
    "RKNNRT_INT8_AFFINE_KERNEL", "1",
    "0 runs an int8 program's per-channel affine maps (a vendor file's standalone "
    "BatchNormalization) as onnxruntime's DequantizeLinear, Mul, Add, Relu, QuantizeLinear "
    "instead of one pass of rknnrt's compiled kernel (core/program/int8_affine.py; same "
    "outputs; read at rknn_init)",
)  # fmt: skip
INT8_BYTE_MAP_KERNEL = Switch(
    "RKNNRT_INT8_BYTE_MAP_KERNEL", "1",
    "0 runs an int8 program's per-tensor requantisations (its int8 input to uint8) and its "
    "quantised activations (DequantizeLinear, HardSigmoid, QuantizeLinear, ...) as "
    "onnxruntime's nodes instead of one table pass of rknnrt's compiled kernel "
    "(core/program/byte_maps.py, byte_tables.py; same outputs; read at rknn_init)",
)  # fmt: skip
INT8_CHANNEL_MUL_KERNEL = Switch(
    "RKNNRT_INT8_CHANNEL_MUL_KERNEL", "1",
    "0 runs an int8 program's per-channel multiplies (squeeze-and-excitation gates) as "
    "onnxruntime's QLinearMul instead of one pass of rknnrt's compiled kernel "
    "(core/program/channel_muls.py; same outputs; read at rknn_init)",
)  # fmt: skip
INT8_EXACT_SOFTMAX = Switch(
    "RKNNRT_INT8_EXACT_SOFTMAX", "1",
    "0 lets onnxruntime fuse an int8 program's DequantizeLinear -> Softmax -> QuantizeLinear "
    "into its QLinearSoftmax, which scales by floor(1 / output scale) (other bytes than the "
    "nodes', and slower) instead of quantising the float Softmax with rknnrt's compiled "
    "kernel (core/program/softmax_quantize.py; read at rknn_init)",
)  # fmt: skip
WINDOW_MEAN_KERNEL = Switch(
    "RKNNRT_WINDOW_MEAN_KERNEL", "1",
    "0 runs a vendor file's AveragePool as the strided Slices, Adds and Div it is rebuilt as "
    "instead of in one pass of rknnrt's compiled kernel (core/program/window_means.py: the "
    "same bits, slower; read at rknn_init)",
)  # fmt: skip
INT8_CONV_KERNEL = Switch(
    "RKNNRT_INT8_CONV_KERNEL", "1",
    "0 keeps an int8 program's dense convs, Gemms and MatMuls on onnxruntime's kernels "
    "(QLinearConv, or int8_islands' float convs on integers) instead of rknnrt's compiled VNNI "
    "kernel, which runs them only on CPUs with AVX-512 VNNI (core/program/qconv_kernel.py; "
    "same outputs; read at rknn_init)",
)  # fmt: skip
INT8_RESIDUAL_KERNEL = Switch(
    "RKNNRT_INT8_RESIDUAL_KERNEL", "1",
    "0 keeps a residual's Add, Relu or Clip and QuantizeLinear after an int8 conv on the "
    "compiled VNNI kernel as onnxruntime's float ops instead of in the kernel's pass "
    "(core/program/conv_epilogue.py; same outputs; read at rknn_init)",
)  # fmt: skip
INT8_ISLANDS = Switch(
    "RKNNRT_INT8_ISLANDS", "1",
    "0 runs an int8 program's convs whose output is not stored in float32 on dequantised "
    "weights, as before, instead of accumulating them in integers as the NPU does "
    "(core/program/int8_islands.py; read at rknn_init)",
)  # fmt: skip
GROUPED_CONVS = Switch(
    "RKNNRT_GROUPED_CONVS", "1",
    "0 runs a float grouped convolution the vendor's compiler wrote as one conv per group "
    "(Split, convs, Concat) as those convs instead of one grouped conv "
    "(core/program/grouped_convs.py; read at rknn_init)",
)  # fmt: skip
SELECTION_CONVS = Switch(
    "RKNNRT_SELECTION_CONVS", "1",
    "0 runs 1x1 float convs whose weights only select channels (a vendor ShuffleNet's "
    "shuffles) as convolutions instead of Gathers (core/program/selection_convs.py; read at "
    "rknn_init)",
)  # fmt: skip
LAYOUT_CACHE_MB = Switch(
    "RKNNRT_LAYOUT_CACHE_MB", "1024",
    "the most the cache of laid-out float16 programs may hold (core/program/layout_cache.py: "
    "rknn_init lays a model out once, not at every init); 0 turns it off (read at rknn_init; "
    "malformed: the default)",
)  # fmt: skip
FP16_TABLES = Switch(
    "RKNNRT_FP16_TABLES", "1",
    "0 runs a float16 program's chains of element-wise ops between roundings (DeiT's GELU, "
    "MobileNetV3's HardSigmoid gates...) op by op instead of as one table pass of rknnrt's "
    "compiled kernel "
    "(core/program/fp16_tables.py; same values; read at rknn_init)",
)  # fmt: skip
CACHE_DIR = Switch(
    "RKNNRT_CACHE_DIR", "",
    "the folder of rknnrt's caches (the C library's build, the compiled int8 kernels, laid-out "
    "float16 programs); unset: "
    "$XDG_CACHE_HOME/rknnrt or ~/.cache/rknnrt (read when a cache is used)",
)  # fmt: skip
TABLE = (LOG_LEVEL, NUM_THREADS, CACHE_MODEL, KEEP_PRIORITY, PLATFORM, CALL_WAIT_MS, PERF_HOST,
         FP16_BLOCKED, MEMORY_BUDGET_MB, RUN_TIMEOUT_MS, INT8_DEPTHWISE, INT8_DW_KERNEL,
         FP16_ROUND_KERNEL, FP16_BLOCKED_OPS, FP16_TABLES, INT8_AFFINE_KERNEL,
         INT8_BYTE_MAP_KERNEL, INT8_CHANNEL_MUL_KERNEL, INT8_EXACT_SOFTMAX, WINDOW_MEAN_KERNEL,
         INT8_CONV_KERNEL, INT8_RESIDUAL_KERNEL, INT8_ISLANDS, GROUPED_CONVS, SELECTION_CONVS,
         LAYOUT_CACHE_MB, CACHE_DIR)  # fmt: skip


# Active overrides, newest last: (token, name, value). Readers take the tuple as one snapshot
# (no lock on the read path: switches are read per log line and per query); writers replace it
# under the lock, so overrides entered and left by several threads never lose one another.
_overrides: tuple[tuple[object, str, str], ...] = ()
_writers = threading.Lock()


@contextlib.contextmanager
def override(switch: Switch, value: str | int | None) -> Iterator[None]:
    """`switch` reads as `value` in every thread of this process until the block ends.

    Process-wide, as the environment variable would be, without writing os.environ (child
    processes do not inherit it; pass settings to them as arguments). Overrides nest: the
    innermost active one wins, and leaving one (in any order, from any thread) restores what
    the others and the environment say. None overrides nothing (the caller's "as configured")."""
    global _overrides
    if value is None:
        yield
        return
    token = object()
    with _writers:
        _overrides = (*_overrides, (token, switch.name, str(value)))
    try:
        yield
    finally:
        with _writers:
            _overrides = tuple(entry for entry in _overrides if entry[0] is not token)


def _value(name: str) -> str | None:
    for _, overridden, value in reversed(_overrides):
        if overridden == name:
            return value
    return os.environ.get(name)


def raw(switch: Switch) -> str:
    value = _value(switch.name)
    return switch.default if value is None else value


def integer(switch: Switch, default: int | None = None) -> int | None:
    """The switch as an int; `default` when unset or malformed."""
    value = _value(switch.name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return default


def log_level() -> int:
    return integer(LOG_LEVEL, 0) or 0


def num_threads() -> int | None:
    value = _value(NUM_THREADS.name)
    return int(value) if value and value.isdigit() else None


def layout_cache_bytes() -> int:
    """RKNNRT_LAYOUT_CACHE_MB in bytes; 0: no cache."""
    value = integer(LAYOUT_CACHE_MB, int(LAYOUT_CACHE_MB.default))
    return max(value if value is not None else 0, 0) << 20


def cache_root() -> Path:
    """RKNNRT_CACHE_DIR, else $XDG_CACHE_HOME/rknnrt, else ~/.cache/rknnrt."""
    chosen = _value(CACHE_DIR.name)
    if chosen:
        return Path(chosen)
    base = _value("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rknnrt"


def cache_model() -> bool:
    return raw(CACHE_MODEL) != "0"


def keep_priority() -> bool:
    return raw(KEEP_PRIORITY) == "1"


def platform_name() -> str:
    return raw(PLATFORM)


def perf_host() -> bool:
    return raw(PERF_HOST) == "1"


def fp16_blocked() -> bool:
    return raw(FP16_BLOCKED) != "0"


def int8_depthwise() -> bool:
    return raw(INT8_DEPTHWISE) != "0"


def int8_dw_kernel() -> bool:
    return raw(INT8_DW_KERNEL) != "0"


def fp16_round_kernel() -> bool:
    return raw(FP16_ROUND_KERNEL) != "0"


def fp16_blocked_ops() -> bool:
    return raw(FP16_BLOCKED_OPS) != "0"


def fp16_tables() -> bool:
    return raw(FP16_TABLES) != "0"


def int8_affine_kernel() -> bool:
    return raw(INT8_AFFINE_KERNEL) != "0"


def int8_byte_map_kernel() -> bool:
    return raw(INT8_BYTE_MAP_KERNEL) != "0"


def int8_channel_mul_kernel() -> bool:
    return raw(INT8_CHANNEL_MUL_KERNEL) != "0"


def int8_exact_softmax() -> bool:
    return raw(INT8_EXACT_SOFTMAX) != "0"


def window_mean_kernel() -> bool:
    return raw(WINDOW_MEAN_KERNEL) != "0"


def int8_conv_kernel() -> bool:
    return raw(INT8_CONV_KERNEL) != "0"


def int8_residual_kernel() -> bool:
    return raw(INT8_RESIDUAL_KERNEL) != "0"


def int8_islands() -> bool:
    return raw(INT8_ISLANDS) != "0"


def grouped_convs() -> bool:
    return raw(GROUPED_CONVS) != "0"


def selection_convs() -> bool:
    return raw(SELECTION_CONVS) != "0"


def call_wait_ms() -> int:
    value = integer(CALL_WAIT_MS, 60000)
    return value if value is not None and value > 0 else 60000


def memory_budget_bytes() -> int:
    value = integer(MEMORY_BUDGET_MB, 8192)
    return (value if value is not None and value > 0 else 8192) << 20


def run_timeout_ms() -> int:
    value = integer(RUN_TIMEOUT_MS, 600000)
    return value if value is not None and value > 0 else 600000
