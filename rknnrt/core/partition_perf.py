"""PERF_DETAIL for a partitioned model (core/partition.py): each NPU or CPU segment profiled
by core/perf.py, each custom op timed around its callbacks, one table with a Target column.

A custom op's estimate is its measured CPU time plus the cost of moving its inputs and outputs
between the NPU and the CPU (their bytes at the platform's DDR bandwidth, both ways).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import onnx

from . import perf
from .partition import SegmentedBinding, SegmentedProgram
from .platforms import Platform


def perf_table(program: SegmentedProgram, binding: SegmentedBinding, weights: np.ndarray,
               platform: Platform, split: int, core_mask: int) -> str:  # fmt: skip
    """The PERF_DETAIL text of the last run's inputs (the binding's buffers hold them)."""
    meta = program.meta
    plain = replace(meta, inputs=[], outputs=[])
    segments = []
    for step in program.steps:
        if step.session is not None:
            segments.append((step, perf.Profiler(plain, step.graph)))
    quantized = any(p.dtype == "INT8" for _, p in segments)
    model = perf.CostModel(platform, "INT8" if quantized else "FLOAT16", split)
    rows = [perf._io_row("InputOperator", s, [], [s.shape], model) for s in meta.inputs]
    profilers = dict((id(step), profiler) for step, profiler in segments)
    custom = iter(binding.custom_calls())
    for step in program.steps:
        if step.session is not None:
            profiler = profilers[id(step)]
            used = {t.name for t in onnx.load_model_from_string(step.graph).graph.initializer}
            profiler.meta = replace(plain, weights=[w for w in meta.weights if w.name in used])
            feeds = {name: binding.buffers[name] for name in step.inputs}
            times = profiler.measure(weights, feeds)
            for row in perf.rows(profiler, times, model):
                rows.append(replace(row, target=step.device))
            continue
        args = next(custom)
        node, ins, outs = args[:3]
        start = time.perf_counter()
        binding.run_custom(*args)
        us = (time.perf_counter() - start) * 1e6
        moved = sum(binding.buffers[n].nbytes for n in step.inputs + step.outputs)
        transfer_us = moved / (platform.ddr_gbps * 1e3) if platform.ddr_gbps else 0.0
        est = perf.Estimate(time_us=us + transfer_us, workload=model._workload(0))
        rows.append(perf.OpRow(node.op_type, node.name, "FLOAT32", "CPU",
                               [list(a.shape) for a in ins], [list(a.shape) for a in outs],
                               us, moved, est))  # fmt: skip
    rows += [perf._io_row("OutputOperator", s, [s.shape], [s.shape], model) for s in meta.outputs]
    return perf.render(rows, model, core_mask)
