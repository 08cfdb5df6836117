"""`RKNN.init_runtime` and what runs on it: rknnrt's own runtime, through `rknnrt.lite` (the
public API; the converter never imports the runtime's internals).

There is no board: `target=None` simulates the model's own platform, and a named target is
simulated too, after one `I` line saying no board is attached.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..lite import RKNNLite
from ..model import targets
from ..model.container import custom_op_types
from .errors import ConversionError


class RuntimeReported(ConversionError):
    """The runtime failed and already printed its `E RKNN:` line: no second line."""


class Simulation:
    """One initialised runtime over one model file."""

    def __init__(self, model: bytes, platform: str | None, target: str | None, perf_debug: bool,
                 async_mode: bool, core_mask: int,
                 custom_ops: Mapping[str, Any] | None = None) -> None:  # fmt: skip
        if target is not None:
            name = targets.canonical(str(target))
            if name is None:
                raise ConversionError(f"target '{target}' is not one of "
                                      f"{', '.join(targets.NAMES)}")  # fmt: skip
            if platform is not None and name != platform:
                raise ConversionError(f"the model was built for {platform}, not {name}: "
                                      f"config(target_platform='{name}') and build again")
            sys.stderr.write(f"I no {name} board is attached: simulating {name} on this PC "
                             "with rknnrt's runtime\n")  # fmt: skip
        self.model, self.core_mask, self.perf_debug = model, core_mask, perf_debug
        self.custom_ops = _ops_of(model, custom_ops or {})
        self.lite = RKNNLite()
        if self.lite.load_rknn(model) or self.lite.init_runtime(
            async_mode=async_mode, core_mask=core_mask, perf_debug=perf_debug
        ):  # the runtime logged the reason
            self.lite.release()
            raise RuntimeReported("the runtime could not load the model")
        self._register(self.lite)
        self._last_inputs: list[np.ndarray] | None = None
        self._last_format: Any = None

    def inference(self, inputs: Sequence[np.ndarray], data_format: Any,
                  pass_through: Any) -> list[np.ndarray] | None:  # fmt: skip
        out = self.lite.inference(inputs, data_format=data_format,
                                  inputs_pass_through=pass_through)  # fmt: skip
        if out is not None:
            self._last_inputs, self._last_format = list(inputs), data_format
        return out

    def perf(self) -> tuple[str, int]:
        """The per-layer table and the total µs of one run (on the last inputs, else zeros),
        from a second context with performance collection on."""
        probe = RKNNLite()
        try:
            if probe.load_rknn(self.model) or probe.init_runtime(core_mask=self.core_mask,
                                                                 perf_debug=True):  # fmt: skip
                raise RuntimeReported("the runtime could not load the model for profiling")
            self._register(probe)
            inputs, fmt = self._last_inputs, self._last_format
            if inputs is None:
                inputs, fmt = [np.zeros(s, np.float32) for s, _ in probe.input_shapes()], None
            if probe.inference(inputs, data_format=fmt) is None:
                raise RuntimeReported("the profiling run failed")
            table, total = probe.perf_detail(), probe.perf_run_us()
            if table is None or total is None:
                raise ConversionError("the runtime gave no performance data")
            return table, total
        finally:
            probe.release()

    def _register(self, lite: RKNNLite) -> None:
        """The toolkit's custom ops, registered with the runtime after init: the runtime
        calls each one's compute(node, inputs) for its nodes, as the vendor's simulator does."""
        if self.custom_ops and lite.register_custom_ops(self.custom_ops):
            lite.release()  # the runtime logged the reason
            raise RuntimeReported("the runtime refused the custom operators")

    def memory(self) -> dict[str, int]:
        sizes = self.lite.mem_size()
        if sizes is None:
            raise ConversionError("the runtime gave no memory sizes")
        return sizes

    def sdk_version(self) -> str:
        return self.lite.get_sdk_version()

    def release(self) -> None:
        self.lite.release()


def _ops_of(model: bytes, registered: Mapping[str, Any]) -> list[Any]:
    """The registered ops (RKNN.reg_custom_op) of the model's custom op types; ConversionError
    naming those of the model that were not registered."""
    types = custom_op_types(model)
    missing = [t for t in types if t not in registered]
    if missing:
        raise ConversionError(f"the model has custom op(s) {', '.join(missing)}: register "
                              "them with reg_custom_op before init_runtime")  # fmt: skip
    return [registered[t] for t in types]
