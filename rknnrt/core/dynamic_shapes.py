"""Dynamic input shapes on a context: choosing a shape set, and what the CURRENT_* and
INPUT_DYNAMIC_RANGE queries report (facts §5.9, docs/dynamic-shapes.md).

A mixin of Context: the methods use the context's fields set in Context.__init__.
"""

from __future__ import annotations

from . import attrs, layouts
from .errors import FAIL, PARAM_INVALID, RknnError
from .executor import Binding


class DynamicShapes:
    """Shape sets of a dynamic-shape model on a context."""

    def set_input_shapes(self, shapes: list[list[int]]) -> None:
        """Choose the shape set whose input shapes (model layout) are `shapes` (facts §5.9)."""
        if not self.model.dynamic:
            raise RknnError(
                PARAM_INVALID,
                "rknn_set_input_shapes: this model has fixed input shapes (convert it with "
                "config(dynamic_input=...) for shape sets)",
            )
        index = self.model.find_shape_set(shapes)
        if index is None:
            allowed = "; ".join(
                ", ".join(str(self.reported_dims(i, s)) for i, s in enumerate(shape_set))
                for shape_set in self.model.meta.input_shape_sets
            )
            asked = ", ".join(str(self.reported_dims(i, s)) for i, s in enumerate(shapes))
            raise RknnError(
                PARAM_INVALID,
                f"rknn_set_input_shapes error: input shapes {asked} are not supported; the "
                f"supported input shapes are as follows (NHWC for 4-D inputs): {allowed}",
            )
        if index == self.shape_set:
            return
        self._settle("rknn_set_input_shapes")
        self._ready = None
        self.shape_set = index
        self.inputs, self.outputs = self.model.plans_for(index)
        if index in self._per_set:
            self._feed_arrays, self._binding = self._per_set[index]
        else:
            self._feed_arrays = [plan.new_buffer() for plan in self.inputs]
            if self.program is not None:
                specs = [plan.spec for plan in self.outputs]
                self._binding = Binding(self.program, self._feed_arrays, specs)
                self._per_set[index] = (self._feed_arrays, self._binding)
        self._inputs_ready = [False] * len(self.inputs)
        self._has_results = False

    def set_input_shape(self, index: int, shape: list[int]) -> None:
        """The deprecated one-input call: once every input has a shape, choose their set."""
        self._pending_shapes[index] = shape
        count = len(self.model.inputs)
        if len(self._pending_shapes) == count:
            self.set_input_shapes([self._pending_shapes[i] for i in range(count)])

    def model_layout_shape(self, dims: list[int], fmt: str, what: str) -> list[int]:
        """Dims as an application gives them (NHWC for 4-D inputs) in the model's layout."""
        if len(dims) == 4 and fmt == "NHWC":
            return layouts.nhwc_to_nchw_dims(dims)
        if len(dims) == 4 and fmt != "NCHW":
            raise RknnError(PARAM_INVALID, f"{what}: 4-D input shapes are given as NHWC, not {fmt}")
        return dims

    def reported_dims(self, index: int, shape: list[int]) -> list[int]:
        """Input dims as the runtime reports them: NHWC for 4-D inputs."""
        return layouts.nchw_to_nhwc_dims(shape) if len(shape) == 4 else list(shape)

    def check_shapes_chosen(self, call: str) -> None:
        if self.model.dynamic and self.shape_set is None:
            raise RknnError(
                FAIL,
                f"{call}: this model has dynamic input shapes; call rknn_set_input_shapes "
                "first to choose one of its shape sets",
            )

    def current_input_attr(self, index: int, native: bool) -> attrs.Attr:
        self.check_shapes_chosen("RKNN_QUERY_CURRENT_INPUT_ATTR")
        self._check_index(index, len(self.inputs), "input")
        plan = self.inputs[index]
        return plan.native if native else attrs.input_attr(index, plan.spec)

    def current_output_attr(self, index: int, native: bool) -> attrs.Attr:
        self.check_shapes_chosen("RKNN_QUERY_CURRENT_OUTPUT_ATTR")
        self._check_index(index, len(self.outputs), "output")
        spec = self.outputs[index].spec
        if native:
            return attrs.native_output_attr(index, spec, self.platform, False)
        return attrs.output_attr(index, spec)

    def dynamic_range(self, index: int) -> tuple[str, str, list[list[int]]]:
        """(name, fmt, shapes) of input `index` over every shape set, as reported."""
        if not self.model.dynamic:
            raise RknnError(FAIL, "RKNN_QUERY_INPUT_DYNAMIC_RANGE: the model has fixed shapes")
        self._check_index(index, len(self.model.inputs), "input")
        spec = self.model.meta.inputs[index]
        shapes = [self.reported_dims(index, s[index]) for s in self.model.meta.input_shape_sets]
        return spec.name, "NHWC" if len(spec.shape) == 4 else "UNDEFINED", shapes
