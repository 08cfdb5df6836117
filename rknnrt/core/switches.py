"""Every environment variable the runtime reads, in one table, and the one reader of each.

Each is read where its value is needed (a call that reads it says when); nothing else in
rknnrt/core, rknnrt/api or rknnrt/lite.py reads os.environ.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


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
    "RKNNRT_PLATFORM", "rk3588",
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
    "onnxruntime's blocked layout (core/fp16_layout.py: same outputs, slower; read at rknn_init)",
)  # fmt: skip
INT8_DEPTHWISE = Switch(
    "RKNNRT_INT8_DEPTHWISE", "1",
    "0 leaves an int8 program's depthwise convs with per-channel weight zero points to "
    "onnxruntime's slow QLinearConv path (core/int8_depthwise.py: same outputs; read at "
    "rknn_init)",
)  # fmt: skip
TABLE = (LOG_LEVEL, NUM_THREADS, CACHE_MODEL, KEEP_PRIORITY, PLATFORM, CALL_WAIT_MS, PERF_HOST,
         FP16_BLOCKED, INT8_DEPTHWISE)  # fmt: skip


def raw(switch: Switch) -> str:
    return os.environ.get(switch.name, switch.default)


def integer(switch: Switch, default: int | None = None) -> int | None:
    """The switch as an int; `default` when unset or malformed."""
    value = os.environ.get(switch.name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return default


def log_level() -> int:
    return integer(LOG_LEVEL, 0) or 0


def num_threads() -> int | None:
    value = os.environ.get(NUM_THREADS.name)
    return int(value) if value and value.isdigit() else None


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


def call_wait_ms() -> int:
    value = integer(CALL_WAIT_MS, 60000)
    return value if value is not None and value > 0 else 60000
