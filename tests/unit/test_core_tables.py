"""The core's single owners (issue 10): InitOptions decodes every RKNN_FLAG_*, switches.py lists
every environment variable, layouts.py computes every stride and size."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import rknnrt as rk
from rknnrt.core import switches
from rknnrt.core.context.options import FLAG_BITS, InitOptions
from rknnrt.core.io import layouts

ROOT = Path(rk.__file__).parent


def test_flag_bits_are_the_headers() -> None:
    assert FLAG_BITS == {name: getattr(rk, name) for name in FLAG_BITS}
    priorities = {"RKNN_FLAG_PRIOR_HIGH", "RKNN_FLAG_PRIOR_MEDIUM", "RKNN_FLAG_PRIOR_LOW"}
    header = {n for n in dir(rk) if n.startswith("RKNN_FLAG_") and n not in priorities
              and not n.startswith("RKNN_FLAG_MEMORY_")}  # fmt: skip
    assert set(FLAG_BITS) == header


@pytest.mark.parametrize("name, field, value", [
    ("RKNN_FLAG_ASYNC_MASK", "async_mode", True),
    ("RKNN_FLAG_COLLECT_PERF_MASK", "collect_perf", True),
    ("RKNN_FLAG_MEM_ALLOC_OUTSIDE", "mem_alloc_outside", True),
    ("RKNN_FLAG_MEM_ALLOC_OUTSIDE", "internal_alloc_outside", True),
    ("RKNN_FLAG_SHARE_WEIGHT_MEM", "share_weight_mem", True),
    ("RKNN_FLAG_FENCE_IN_OUTSIDE", "fence_in", True),
    ("RKNN_FLAG_FENCE_OUT_OUTSIDE", "fence_out", True),
    ("RKNN_FLAG_COLLECT_MODEL_INFO_ONLY", "info_only", True),
    ("RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE", "internal_alloc_outside", True),
    ("RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU", "fallback_gpu", True),
    ("RKNN_FLAG_ENABLE_SRAM", "enable_sram", True),
    ("RKNN_FLAG_SHARE_SRAM", "share_sram", True),
    ("RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY", "keep_process_priority", True),
    ("RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE", "flush_inputs", False),
    ("RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE", "invalidate_outputs", False),
    ("RKNN_FLAG_MODEL_BUFFER_ZERO_COPY", "model_zero_copy", True),
])  # fmt: skip
def test_each_flag_sets_its_field(name: str, field: str, value: bool) -> None:
    default = InitOptions()
    options = InitOptions.from_flag(getattr(rk, name))
    assert getattr(default, field) is not value
    assert getattr(options, field) is value
    assert options.names == frozenset({name})


def test_priority_and_unknown_bits(rknn_log) -> None:
    assert InitOptions.from_flag(0).priority == "HIGH"
    assert InitOptions.from_flag(rk.RKNN_FLAG_PRIOR_MEDIUM).priority == "MEDIUM"
    assert InitOptions.from_flag(rk.RKNN_FLAG_PRIOR_LOW).priority == "LOW"
    assert rknn_log.take() == []
    both = InitOptions.from_flag(rk.RKNN_FLAG_PRIOR_MEDIUM | rk.RKNN_FLAG_PRIOR_LOW)
    assert both.priority == "LOW"
    assert "PRIOR_MEDIUM and PRIOR_LOW both set" in rknn_log.take("W")[0]
    assert InitOptions.from_flag(0x100000).names == frozenset()
    assert "unknown flag bits 0x100000" in rknn_log.take("W")[0]


def test_every_environment_variable_is_in_the_switch_table() -> None:
    """Names read anywhere in the runtime are in switches.TABLE; only switches.py touches
    os.environ."""
    names = {s.name for s in switches.TABLE}
    readers = set()
    for path in [*ROOT.joinpath("core").rglob("*.py"), *ROOT.joinpath("api").rglob("*.py"),
                 ROOT / "lite.py"]:  # fmt: skip
        text = path.read_text()
        for name in re.findall(r"\"(RKNN(?:RT)?_[A-Z_]+)\"", text):
            if "LOG_LEVEL" in name or name.startswith("RKNNRT_"):
                assert name in names, f"{path.name} reads {name}, not in switches.TABLE"
        if "os.environ" in text:
            readers.add(path.name)
    assert readers <= {"switches.py"}


def test_switch_readers(monkeypatch) -> None:
    monkeypatch.setenv("RKNNRT_CALL_WAIT_MS", "250")
    assert switches.call_wait_ms() == 250
    monkeypatch.setenv("RKNNRT_CALL_WAIT_MS", "nonsense")
    assert switches.call_wait_ms() == 60000
    monkeypatch.setenv("RKNNRT_NUM_THREADS", "3")
    assert switches.num_threads() == 3
    monkeypatch.setenv("RKNNRT_NUM_THREADS", "x")
    assert switches.num_threads() is None
    monkeypatch.setenv("RKNN_LOG_LEVEL", "4")
    assert switches.log_level() == 4


def test_stride_and_size_rules() -> None:
    # alignment in bytes: 16 B = 16 int8 px, 8 float16 px, 4 float32 px (vendor field 20)
    assert layouts.w_stride(30, 16, 1) == 32 and layouts.w_stride(32, 16, 1) == 32
    assert layouts.w_stride(15, 16, 2) == 16 and layouts.w_stride(17, 16, 2) == 24
    assert layouts.w_stride(15, 8, 2) == 16 and layouts.w_stride(13, 8, 2) == 16
    assert layouts.w_stride(21, 16, 4) == 24 and layouts.w_stride(21, 8, 4) == 22
    assert layouts.size_with_stride([2, 5, 30, 3], 32, 2) == 2 * 5 * 32 * 3 * 2
    # NCHW [2,3,4,5] as NHWC bytes: rows padded to 8 pixels, batches to 6 rows
    assert layouts.nhwc_bytes((2, 3, 4, 5), 1) == 2 * 4 * 5 * 3
    assert layouts.nhwc_bytes((2, 3, 4, 5), 4, 8, 6) == (6 + 4) * 8 * 3 * 4
    assert layouts.output_dims([1, 5, 8, 8], "NHWC", 16) == [1, 8, 8, 5]
    assert layouts.output_dims([1, 5, 8, 8], "NC1HWC2", 4) == [1, 2, 8, 8, 4]
    assert layouts.output_dims([1, 10], "NC1HWC2", 4) == [1, 10]
