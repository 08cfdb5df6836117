"""The named session policies, and the package's only call that opens an onnxruntime session.

One policy per use, each saying why (design §3: the NPU leaves the CPUs to the application once a
run returns, so runtime sessions never keep workers spinning; the converter's analysis sessions
compute every named tensor as the graph states it, so they run unoptimised):

- PROGRAM: a model's program and its segments. RKNNRT_NUM_THREADS threads, workers stop
  spinning after each run, full optimisation, exact int8 kernels.
- PROFILER: the board estimate's host profile. RKNNRT_NUM_THREADS, optimisation off (one timed
  node per graph node), exact int8 kernels.
- HELPER: small sessions inside a run (input casts, matmul's float16 conversion, custom-op
  built-ins): one thread, no spinning, no pool of its own to wake.
- KERNEL_PROBE: the int8-kernel probe itself (it asks for the exact kernels explicitly).
- ANALYSIS: the converter's calibration, accuracy analysis and probes: the caller's threads,
  optimisation off, exact int8 kernels.
- FOLDING: constant folding, shapes from a run: optimisation off.
- REFERENCE: float references (evaluation, the converter's custom-op samples): the caller's
  threads (intra- and inter-op), full optimisation.

Fallback is always off (`enable_fallback=0`): onnxruntime's Python layer would otherwise print
"EP Error" lines to stdout and retry the same provider when a session fails to build. onnxruntime's
own log lines are never printed (severity 4, fatal only): its warnings are not the runtime's to
print, and its errors reach the caller as exceptions, which the runtime reports in one `E` line
of its own (at severity 3 a failing session build or run printed onnxruntime's line as well).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PRECISION_KEY = "session.x64quantprecision"  # exact (u8u8) int8 kernels on x86
SPIN_STOP_KEY = "session.force_spinning_stop"
ALLOW_SPIN_KEY = "session.intra_op.allow_spinning"


@dataclass(frozen=True)
class Policy:
    name: str
    threads: int | None  # None: the caller's count, else onnxruntime's default
    spinning: str  # "stopped": workers stop after each run; "off": never spin; "default"
    optimise: bool  # False: ORT_DISABLE_ALL, every named tensor computed as the graph states it
    exact_int8: bool  # exact int8 kernels wherever this CPU's fast ones saturate
    inter_op_too: bool = False  # the thread count also bounds the inter-op pool


PROGRAM = Policy("program", None, "stopped", True, True)
PROFILER = Policy("profiler", None, "default", False, True)
HELPER = Policy("helper", 1, "off", True, True, inter_op_too=True)
KERNEL_PROBE = Policy("kernel_probe", 1, "default", True, False)
ANALYSIS = Policy("analysis", None, "default", False, True)
FOLDING = Policy("folding", None, "default", False, True)
REFERENCE = Policy("reference", None, "default", True, True, inter_op_too=True)


def session_options(policy: Policy, threads: int | None, exact_int8: bool) -> Any:
    """The SessionOptions of `policy`; `threads` overrides the policy's count when it has none;
    `exact_int8`: ask for the exact int8 kernels (decided by the factory)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    count = policy.threads if policy.threads is not None else threads
    if count:
        options.intra_op_num_threads = count
        if policy.inter_op_too:
            options.inter_op_num_threads = count
    if policy.spinning == "stopped":
        options.add_session_config_entry(SPIN_STOP_KEY, "1")
    elif policy.spinning == "off":
        options.add_session_config_entry(ALLOW_SPIN_KEY, "0")
    if not policy.optimise:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if exact_int8:
        options.add_session_config_entry(PRECISION_KEY, "1")
    return options


def open_session(model: bytes | str, options: Any) -> Any:
    """The one InferenceSession of the package: CPU provider, fallback off."""
    import onnxruntime as ort

    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"],
                                enable_fallback=0)  # fmt: skip
