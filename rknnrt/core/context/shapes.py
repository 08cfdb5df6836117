"""A context's IO shapes: the current shape set (dynamic models, facts §5.9), the feed arrays
the program reads, their binding to the program, and which inputs are set."""

from __future__ import annotations

import numpy as np

from ..errors import FAIL, PARAM_INVALID, RknnError
from ..io import attrs, layouts
from ..io.plans import InputPlan, OutputPlan
from ..program.base import Binding, Program
from .model import Model


def check_index(index: int, count: int, what: str) -> None:
    if not 0 <= index < count:
        raise RknnError(
            PARAM_INVALID, f"{what} index {index} is out of range: the model has {count}"
        )


def reported_dims(shape: list[int]) -> list[int]:
    """Input dims as the runtime reports them: NHWC for 4-D inputs."""
    return layouts.nchw_to_nhwc_dims(shape) if len(shape) == 4 else list(shape)


class Shapes:
    """Plans, feed arrays and binding of the current shape set (one set for fixed models)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.platform = model.platform
        self.inputs: list[InputPlan] = model.inputs
        self.outputs: list[OutputPlan] = model.outputs
        self.shape_set: int | None = None
        self.feeds = [plan.new_buffer() for plan in model.inputs]
        self.binding: Binding | None = None
        self.inputs_ready = [False] * len(model.inputs)
        self._program: Program | None = None
        self._pending: dict[int, list[int]] = {}  # rknn_set_input_shape, per input
        self._per_set: dict[int | None, tuple[list[np.ndarray], Binding]] = {}

    def bind_program(self, program: Program | None) -> None:
        """(Re)bind the feeds and fresh outputs to `program` (after load or new weights)."""
        # custom ops move to the new binding
        registered = self.binding.registered_ops() if self.binding is not None else []
        self._destroy_bindings()
        self._program = program
        if program is None:
            self.binding, self._per_set = None, {}
            return
        self.binding = self._new_binding(program)
        self._per_set = {self.shape_set: (self.feeds, self.binding)}
        if registered:
            self.binding.register(registered)

    def _new_binding(self, program: Program) -> Binding:
        return program.bind(self.feeds, [plan.spec for plan in self.outputs])

    def _destroy_bindings(self) -> None:
        """Custom operators' destroy callbacks, once per binding (shape sets share none)."""
        seen = {id(b): b for _, b in self._per_set.values()}
        if self.binding is not None:
            seen[id(self.binding)] = self.binding
        for binding in seen.values():
            binding.destroy()

    def unbind(self) -> None:
        self._destroy_bindings()
        self.binding, self._program, self._per_set = None, None, {}

    def all_inputs_set(self) -> bool:
        return all(self.inputs_ready)

    def missing_inputs(self) -> list[str]:
        return [p.spec.name for p, ok in zip(self.inputs, self.inputs_ready) if not ok]

    def io_bytes(self) -> int:
        """Bytes of the feed arrays and output buffers the context allocated."""
        total = sum(a.nbytes for a in self.feeds)
        if self.binding is not None:
            total += sum(a.nbytes for a in self.binding.outputs)
        return total

    # -- dynamic shapes ---------------------------------------------------------------------
    def find(self, shapes: list[list[int]]) -> int:
        """The shape set whose input shapes (model layout) are `shapes` (facts §5.9)."""
        if not self.model.dynamic:
            raise RknnError(
                PARAM_INVALID,
                "rknn_set_input_shapes: this model has fixed input shapes (convert it with "
                "config(dynamic_input=...) for shape sets)",
            )
        index = self.model.find_shape_set(shapes)
        if index is None:
            allowed = "; ".join(
                ", ".join(str(reported_dims(s)) for s in shape_set)
                for shape_set in self.model.meta.input_shape_sets
            )
            asked = ", ".join(str(reported_dims(s)) for s in shapes)
            raise RknnError(
                PARAM_INVALID,
                f"rknn_set_input_shapes error: input shapes {asked} are not supported; the "
                f"supported input shapes are as follows (NHWC for 4-D inputs): {allowed}",
            )
        return index

    def choose(self, index: int) -> None:
        """Switch to shape set `index`: its plans, feeds and binding (made once per set)."""
        self.shape_set = index
        self.inputs, self.outputs = self.model.plans_for(index)
        if index in self._per_set:
            self.feeds, self.binding = self._per_set[index]
        else:
            self.feeds = [plan.new_buffer() for plan in self.inputs]
            if self._program is not None:
                self.binding = self._new_binding(self._program)
                self._per_set[index] = (self.feeds, self.binding)
        self.inputs_ready = [False] * len(self.inputs)

    def add_pending(self, index: int, shape: list[int]) -> list[list[int]] | None:
        """The deprecated one-input call: the full set once every input has a shape."""
        self._pending[index] = shape
        count = len(self.model.inputs)
        if len(self._pending) == count:
            return [self._pending[i] for i in range(count)]
        return None

    def check_chosen(self, call: str) -> None:
        if self.model.dynamic and self.shape_set is None:
            raise RknnError(
                FAIL,
                f"{call}: this model has dynamic input shapes; call rknn_set_input_shapes "
                "first to choose one of its shape sets",
            )

    # -- queries ----------------------------------------------------------------------------
    def current_input_attr(self, index: int, native: bool) -> attrs.Attr:
        self.check_chosen("RKNN_QUERY_CURRENT_INPUT_ATTR")
        check_index(index, len(self.inputs), "input")
        plan = self.inputs[index]
        return plan.native if native else attrs.input_attr(index, plan.spec)

    def current_output_attr(self, index: int, native: bool) -> attrs.Attr:
        self.check_chosen("RKNN_QUERY_CURRENT_OUTPUT_ATTR")
        check_index(index, len(self.outputs), "output")
        spec = self.outputs[index].spec
        if native:
            return attrs.native_output_attr(index, spec, self.platform, False)
        return attrs.output_attr(index, spec)

    def dynamic_range(self, index: int) -> tuple[str, str, list[list[int]]]:
        """(name, fmt, shapes) of input `index` over every shape set, as reported."""
        if not self.model.dynamic:
            raise RknnError(FAIL, "RKNN_QUERY_INPUT_DYNAMIC_RANGE: the model has fixed shapes")
        check_index(index, len(self.model.inputs), "input")
        spec = self.model.meta.inputs[index]
        shapes = [reported_dims(s[index]) for s in self.model.meta.input_shape_sets]
        return spec.name, "NHWC" if len(spec.shape) == 4 else "UNDEFINED", shapes


def model_layout_shape(dims: list[int], fmt: str, what: str) -> list[int]:
    """Dims as an application gives them (NHWC for 4-D inputs) in the model's layout."""
    if len(dims) == 4 and fmt == "NHWC":
        return layouts.nhwc_to_nchw_dims(dims)
    if len(dims) == 4 and fmt != "NCHW":
        raise RknnError(PARAM_INVALID, f"{what}: 4-D input shapes are given as NHWC, not {fmt}")
    return dims
