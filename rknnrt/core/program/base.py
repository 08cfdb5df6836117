"""What the rest of the core holds: a `Program` and one context's `Binding` of it.

Two implementations: `whole.Program` (one onnxruntime session over the whole graph) and
`segmented.SegmentedProgram` (NPU and CPU segments of a model with custom or CPU operators).
Contexts, frames, the memory plan and PERF_DETAIL use only these two interfaces, so none of them
asks which kind of program it holds.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ...model.meta import TensorSpec


class Binding(Protocol):
    """One context's buffers bound to a program: the feeds are read in place, outputs are
    written into `outputs` (whose addresses the frames hand out)."""

    outputs: list[np.ndarray]
    addresses: list[int]

    def run(self) -> None: ...

    def replace_output(self, index: int) -> None:
        """Give output `index` a new buffer (the old one now belongs to whoever holds it)."""

    def register(self, ops: list[Any]) -> None:
        """rknn_register_custom_ops (PARAM_INVALID where the model has no custom op)."""

    def registered_ops(self) -> list[Any]:
        """The custom ops registered on this binding, to move to a new one."""

    def use_internal(self, views: tuple[np.ndarray, np.ndarray] | None) -> None:
        """Place crossing tensors in the context's internal memory (`views`), or not (None)."""

    def destroy(self) -> None:
        """The custom ops' destroy callbacks."""


class Program(Protocol):
    """A compiled model shared by duplicated contexts."""

    input_names: list[str]
    output_names: list[str]

    def bind(self, inputs: list[np.ndarray], outputs: list[TensorSpec]) -> Binding: ...

    def perf_table(self, binding: Binding, weights: np.ndarray, platform: Any, split: int,
                   core_mask: int) -> str:  # fmt: skip
        """RKNN_QUERY_PERF_DETAIL's text for the binding's current inputs."""
