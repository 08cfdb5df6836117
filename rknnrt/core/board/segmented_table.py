"""PERF_DETAIL for a partitioned model (core/program/segmented.py): each NPU or CPU segment profiled
by core/board/perf.py, each custom op timed around its callbacks, one table with a Target column.

A custom op's row is a CPU layer: the board model's CPU estimate plus the cost of moving its
inputs and outputs between the NPU and the CPU (their bytes at the platform's DDR bandwidth).
Segment boundaries are not rows: only the model's own inputs and outputs get IO rows.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from ..lazy_imports import onnx
from ..platforms import Platform
from . import perf
from .layers import Layer
from .table import render


def perf_table(program: Any, binding: Any, weights: np.ndarray, platform: Platform, split: int,
               core_mask: int) -> str:  # fmt: skip
    """The PERF_DETAIL text of the last run's inputs (the binding's buffers hold them) for a
    core/program/segmented.py program and binding (read, never imported: the program asks)."""
    meta = program.meta
    model_io = {s.name for s in [*meta.inputs, *meta.outputs]}
    plain = replace(meta, inputs=[], outputs=[])
    segments = {id(s): perf.Profiler(plain, s.graph) for s in program.steps if s.session}
    quantized = any(p.dtype == "INT8" for p in segments.values())
    model = perf.CostModel(platform, "INT8" if quantized else "FLOAT16", split)
    rows: list[perf.OpRow] = []
    custom = iter(binding.custom_calls())
    for step in program.steps:
        if step.session is not None:
            profiler = segments[id(step)]
            used = {t.name for t in onnx.load_model_from_string(step.graph).graph.initializer}
            profiler.meta = replace(plain, weights=[w for w in meta.weights if w.name in used])
            feeds = {name: binding.buffers[name] for name in step.inputs}
            times = profiler.measure(weights, feeds)
            for row in perf.rows(profiler, times, model):
                if row.layer.kind == "io" and row.layer.name not in model_io:
                    continue  # a segment boundary, not one of the model's tensors
                rows.append(replace(row, layer=replace(row.layer, target=step.device)))
            continue
        args = next(custom)
        node, ins, outs = args[:3]
        start = time.perf_counter()
        binding.run_custom(*args)
        host_us = (time.perf_counter() - start) * 1e6
        layer = Layer(node.op_type, node.op_type, node.name, "CPU",
                      [list(a.shape) for a in ins], [list(a.shape) for a in outs], "cpu",
                      nodes=[node.name])  # fmt: skip
        moved = sum(binding.buffers[n].nbytes for n in step.inputs + step.outputs)
        transfer_us = moved / (platform.ddr_gbps * 1e3) if platform.ddr_gbps else 0.0
        cost = model.cost(layer)
        cost = replace(cost, time_us=cost.time_us + transfer_us)
        rows.append(perf.OpRow(layer, "FLOAT32", cost, host_us))
    return render(rows, model, core_mask)
