"""A model as rknn_init reads it: its bytes (a path, a buffer, or a zero-copy fd with offsets,
all bounded before anything is read; issue 11 item 7), then one container.read() call, the
metadata, the platform and the IO plans. A Model is shared by a context and its duplicates."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from math import prod

import numpy as np

from ...model import files
from ...model.meta import ModelMeta
from .. import log, platforms, switches
from ..errors import FAIL, MALLOC_FAIL, MODEL_INVALID, PARAM_INVALID, RknnError
from ..io import memory
from ..io.plans import InputPlan, OutputPlan
from ..program import placement, whole
from ..program import segmented as partition
from ..program.base import Program
from ..version import API_VERSION, DRIVER_VERSION
from .options import InitOptions

# No rknnrt model comes near this (vgg19, the largest light model, is ~0.55 GB): a bigger file is
# refused before it is read, as are devices and FIFOs (/dev/zero would never end).
MAX_MODEL_BYTES = 2 << 30


@dataclass(frozen=True)
class InitExtend:
    """The rknn_init_extend fields rknn_init reads (the api layer decodes the struct)."""

    ctx: int = 0
    model_buffer_fd: int = -1
    real_model_offset: int = 0
    real_model_size: int = 0


def read_model_bytes(source: memoryview | str | os.PathLike, size: int,
                     extend: InitExtend | None, options: InitOptions) -> memoryview:  # fmt: skip
    """The model's bytes: `source` itself (a buffer of `size` bytes), a view of an
    rknn_create_mem mapping (model_buffer_fd), or the file `source` names (size 0), read
    between the extend's offsets."""
    if size < 0:
        raise RknnError(PARAM_INVALID, f"size {size} must be >= 0 (0: model is a file path)")
    offset = extend.real_model_offset if extend is not None else 0
    length = extend.real_model_size if extend is not None else 0
    if offset < 0 or length < 0:
        raise RknnError(
            PARAM_INVALID,
            f"extend: real_model_offset {offset} and real_model_size {length} must be >= 0",
        )
    fd = extend.model_buffer_fd if extend is not None else -1
    no_model = isinstance(source, memoryview) and len(source) == 0
    if fd > 0 and (no_model or (options.model_zero_copy and memory.owned_fd(fd))):
        # MODEL_BUFFER_ZERO_COPY from an rknn_create_mem buffer: a view of its own mapping.
        return memory.model_view(fd, offset, length or size)
    if isinstance(source, memoryview):
        return source
    return _read_file(os.fspath(source), offset, length)


def _read_file(path: str, offset: int, length: int) -> memoryview:
    try:  # the package's one reader: a FIFO, device or folder is refused before any read
        f = files.open_regular(path, "rb")
    except files.NotRegularFile:
        raise RknnError(
            PARAM_INVALID, f"model file {path!r} is not a regular file (a device, FIFO or folder)"
        ) from None
    except OSError as exc:
        raise RknnError(FAIL, f"open model file {path!r} failed: {exc}") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if offset + length > size or offset > size:
            raise RknnError(
                PARAM_INVALID,
                f"real_model_offset {offset} + real_model_size {length} exceed the model file "
                f"size {size}",
            )
        wanted = length or size - offset
        if wanted > MAX_MODEL_BYTES:
            raise RknnError(
                MODEL_INVALID,
                f"model file {path!r}: {wanted} bytes is more than any model ({MAX_MODEL_BYTES} "
                "bytes at most); not read",
            )
        f.seek(offset)
        data = f.read(wanted)
    return memoryview(data)


def _check_resources(graph: bytes, meta: ModelMeta) -> None:
    """Every tensor bounded before anything runs (model/op_rules.py): at the specs' shapes and
    at the dynamic shape set with the most input elements; their sum within the budget."""
    from ...model import op_rules

    candidates = [[spec.shape for spec in meta.inputs]]
    if meta.input_shape_sets:
        candidates.append(max(meta.input_shape_sets, key=lambda s: sum(map(prod, s))))
    bound = op_rules.tensor_bound(meta)
    for shapes in candidates:
        try:
            need = op_rules.planned_bytes(graph, tuple(map(tuple, shapes)), bound)
        except op_rules.ModelFormatError as exc:
            raise RknnError(MODEL_INVALID, str(exc)) from None
        budget = switches.memory_budget_bytes()
        if need > budget:
            raise RknnError(
                MALLOC_FAIL,
                f"the model's tensors need up to {need} bytes, more than the memory budget "
                f"of {budget} bytes ({switches.MEMORY_BUDGET_MB.name})",
            )


class Model:
    """Everything read from one model file; shared by a context and its duplicates.

    `weights_section` is a view of the caller's model buffer: valid during rknn_init only,
    except with MODEL_BUFFER_ZERO_COPY, where the application keeps the buffer alive.
    """

    def __init__(self, buf: memoryview) -> None:
        from ...model import container  # reads graphs with onnx: not at `import rknnrt`

        try:
            sections = container.read(buf)
            self.meta = ModelMeta.from_json(sections.metadata, len(sections.weights))
        except container.ModelFormatError as exc:
            raise RknnError(MODEL_INVALID, str(exc)) from None
        _check_resources(bytes(sections.graph), self.meta)
        try:
            self.platform = platforms.get(self.meta.target_platform)
        except KeyError:
            raise RknnError(
                MODEL_INVALID, f"unknown target platform '{self.meta.target_platform}'"
            ) from None
        self.graph = bytes(sections.graph)
        self.format_version = sections.version
        # a vendor .rknn file states the board's own memory figures; rknnrt's are estimates
        self.from_vendor = sections.version == container.VENDOR_FORMAT_VERSION
        self.weights_section: memoryview | None = sections.weights
        self.inputs = [InputPlan(i, s, self.platform) for i, s in enumerate(self.meta.inputs)]
        self.outputs = [OutputPlan(i, s) for i, s in enumerate(self.meta.outputs)]
        self.dynamic = bool(self.meta.input_shape_sets)
        self._plans: dict[int, tuple[list[InputPlan], list[OutputPlan]]] = {}
        log.info(
            f"RKNN Runtime Information, librknnrt version: {API_VERSION}; "
            f"RKNN Driver Information, version: {DRIVER_VERSION}"
        )
        log.info(
            f"RKNN Model Information, version: {self.format_version}, toolkit version: "
            f"{self.meta.toolkit_version}, target platform: {self.meta.target_platform}, "
            f"framework name: {self.meta.framework}, framework layout: NCHW"
        )

    def release_weights_section(self) -> None:
        """The caller may free its model buffer after rknn_init."""
        self.weights_section = None

    def plans_for(self, index: int) -> tuple[list[InputPlan], list[OutputPlan]]:
        """Input and output plans of shape set `index` (made once, then shared)."""
        if index not in self._plans:
            meta = self.meta
            ins = [
                InputPlan(i, replace(spec, shape=shape), self.platform)
                for i, (spec, shape) in enumerate(zip(meta.inputs, meta.input_shape_sets[index]))
            ]
            outs = [
                OutputPlan(i, replace(spec, shape=shape))
                for i, (spec, shape) in enumerate(zip(meta.outputs, meta.output_shape_sets[index]))
            ]
            self._plans[index] = (ins, outs)
        return self._plans[index]

    def find_shape_set(self, shapes: list[list[int]]) -> int | None:
        """The index of the set whose input shapes (model layout) are `shapes`."""
        for index, shape_set in enumerate(self.meta.input_shape_sets):
            if shape_set == shapes:
                return index
        return None

    def program(self, weights: np.ndarray, in_place: bool = False,
                replaced: frozenset[str] = frozenset()) -> Program:  # fmt: skip
        """One onnxruntime program, or NPU and CPU segments when the model has custom ops or
        operators the platform's NPU lacks (core/program/segmented.py). `replaced`: built-in
        op types whose nodes run as custom ops (a registered op of that type replaces them)."""
        if replaced:
            from ...model.custom_ops import as_custom  # imports onnx: not at `import rknnrt`

            graph = as_custom(self.graph, replaced)
            return partition.SegmentedProgram(self.meta, graph, weights, self.platform.name)
        if placement.needs_partition(self.graph, self.platform.name):
            return partition.SegmentedProgram(
                self.meta, self.graph, weights, self.platform.name
            )
        return whole.Program(self.meta, self.graph, weights, in_place)

    def builtin_types(self, op_types: set[str]) -> frozenset[str]:
        """Those of `op_types` that name built-in nodes of the model (not its custom ops):
        a registered op of such a type runs in their place (docs/custom-ops.md)."""
        from ...model import custom_ops  # imports onnx: not at `import rknnrt`
        from ..lazy_imports import onnx

        model = onnx.load_model_from_string(self.graph)
        custom = {n.op_type for n in model.graph.node if custom_ops.is_custom(n)}
        return frozenset((op_types & custom_ops.builtin_op_types(model)) - custom)

    def log_fallback(self, options: InitOptions) -> None:
        """EXECUTE_FALLBACK_PRIOR_DEVICE_GPU: operators the NPU cannot run would prefer the GPU;
        rknnrt has no GPU, so they run on the CPU (core/program/segmented.py places them); say so
        once."""
        if not options.fallback_gpu:
            return
        cpu_ops = sorted(placement.cpu_op_types(self.graph, self.platform.name))
        placed = (f"{', '.join(cpu_ops)} run on the CPU" if cpu_ops
                  else "every operator of this model runs on the NPU")  # fmt: skip
        log.warning(
            "RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU: rknnrt emulates no GPU; operators the "
            f"NPU cannot run fall back to the CPU ({self.platform.name}: {placed})"
        )
