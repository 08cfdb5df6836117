"""The emulated NPU program: the model's graph section run by onnxruntime on the CPU.

One Program is built per model at rknn_init and shared by contexts made with rknn_dup_context:
onnxruntime sessions are safe to run from several threads, and the weights are not copied again.
"""

from __future__ import annotations

import numpy as np

from ..model.errors import ModelFormatError
from ..model.meta import ModelMeta, TensorSpec
from . import fast_graph, fp16_layout, int8_depthwise, int8_kernels, switches
from .errors import MODEL_INVALID, RknnError
from .lazy_imports import onnx, ort

# Operators through which onnxruntime may reach its u8s8 kernels (QDQ fusion included).
_INTEGER_OPS = (b"Quantize", b"QLinear", b"Integer", b"QGemm", b"QAttention")


def session_options(graph: bytes | None = None) -> ort.SessionOptions:
    """Options of every program session; `graph` (when given) lets a graph without integer
    operators skip the int8-kernel probe."""
    options = ort.SessionOptions()
    options.log_severity_level = 3  # onnxruntime's own warnings are not the runtime's to print
    # Exact int8 arithmetic: x86's fast u8s8 kernels saturate 16-bit pair sums (255*127*2)
    # unless the CPU has VNNI, the NPU never does; where a probe of this CPU's kernels finds
    # them saturating, onnxruntime is told to use its exact (slower) ones.
    integer = graph is None or any(op in graph for op in _INTEGER_OPS)
    if integer and not int8_kernels.fast_kernels_exact():
        options.add_session_config_entry(int8_kernels.PRECISION_KEY, "1")
    # The NPU leaves the CPUs to the application once rknn_run returns; onnxruntime's workers
    # would keep spinning after each run and slow whatever runs next (an onnxruntime float32
    # session alternating with an rknnrt one ran 1.9x slower: SqueezeNet 6.9 vs 3.7 ms).
    # Consecutive runs of one program are as fast either way (4.2-4.3 ms, fp16 SqueezeNet).
    options.add_session_config_entry("session.force_spinning_stop", "1")
    threads = switches.num_threads()  # RKNNRT_NUM_THREADS
    if threads is not None:
        options.intra_op_num_threads = threads
    return options


def _weights_as_inputs(graph: bytes) -> bytes:
    """The graph with every weights-section constant turned into a graph input, so that the
    program reads the weights where they lie (onnxruntime copies initializers it is given)."""
    model = onnx.load_model_from_string(graph)
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    for tensor in external:
        model.graph.input.append(
            onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))
        )
        model.graph.initializer.remove(tensor)
    return model.SerializeToString()


def weight_views(meta: ModelMeta, graph: bytes, weights: np.ndarray) -> dict[str, np.ndarray]:
    """The metadata's weights as views of the weight memory, after checking that the graph's
    weights-section constants are exactly those weights (graph_rules: nothing else may reach
    onnxruntime as external data). Shared by one program and a segmented one."""
    from ..model import graph_rules  # imports onnx: not at `import rknnrt`

    try:  # the graph's rules were checked (and cached) by container.read at init
        graph_rules.cross_check(graph_rules.check_graph(graph), meta.weights)
    except ModelFormatError as exc:
        raise RknnError(MODEL_INVALID, str(exc)) from None
    views = {}
    try:
        for w in meta.weights:
            dtype = np.dtype(np.bool_) if w.dtype == "bool" else np.dtype(w.dtype)
            views[w.name] = weights[w.offset : w.offset + w.nbytes].view(dtype).reshape(w.shape)
    except ValueError as exc:  # a weight that does not fit the weight memory
        raise RknnError(MODEL_INVALID, f"the model's weights do not fit: {exc}") from None
    return views


class Program:
    """A compiled graph plus the weights it reads (views of the context's weight memory).

    `in_place`: the weights stay inputs bound to the weight memory (MODEL_BUFFER_ZERO_COPY: no
    copy at all). onnxruntime then cannot pre-pack them or re-lay them out (its NCHWc
    transform), so such a program is slower and its results may differ from the copying one's
    by float rounding (docs/memory.md). Otherwise the weights are handed to onnxruntime as
    initializers, which it copies and optimises.
    """

    def _check_types(self, meta: ModelMeta) -> None:
        """The graph's IO types and static dims must be what the metadata reports."""
        nodes = {n.name: n for n in self.session.get_inputs() + self.session.get_outputs()}
        for spec in [*meta.inputs, *meta.outputs]:
            node = nodes.get(spec.name)
            if node is None:
                continue  # reported by the name check
            dims = [d for d in node.shape]
            fixed = [(a, b) for a, b in zip(dims, spec.shape) if isinstance(a, int)]
            if (
                node.type != _ORT_TYPES.get(spec.dtype)
                or len(dims) != len(spec.shape)
                or any(a != b for a, b in fixed)
            ):
                raise RknnError(
                    MODEL_INVALID,
                    f"tensor '{spec.name}': the graph has {node.type} {dims}, the metadata "
                    f"{spec.dtype} {spec.shape}",
                )

    def __init__(self, meta: ModelMeta, graph: bytes, weights: np.ndarray,
                 in_place: bool = False) -> None:  # fmt: skip
        options = session_options(bytes(graph))
        views = weight_views(meta, graph, weights)
        names, values = list(views), list(views.values())
        try:
            graph = fast_graph.rewrite(graph)  # exact, faster in onnxruntime
            if switches.int8_depthwise():  # exact: depthwise convs off a slow kernel path
                graph, unused = int8_depthwise.rewrite(graph, views)
                names, values = [n for n in names if n not in unused], \
                    [v for n, v in zip(names, values) if n not in unused]  # fmt: skip
            self.weight_views = list(zip(names, values)) if in_place else []
            if in_place:
                graph = _weights_as_inputs(graph)
            else:
                weights_given = (names, [ort.OrtValue.ortvalue_from_numpy(v) for v in values])
                blocked = _fp16_blocked(graph, weights_given)
                if blocked is not None:  # laid out, weights included: run as it is
                    graph, self._laid_out = blocked
                    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
                    if blocked.data.size:
                        data = blocked.data
                        options.add_external_initializers_from_files_in_memory(
                            [fp16_layout.DATA_FILE], [data], [data.size])  # fmt: skip
                elif names:
                    options.add_external_initializers(*weights_given)
            # enable_fallback=0: onnxruntime's Python layer would otherwise print "EP Error"
            # lines to stdout and retry the same provider when the session fails to build.
            self.session = ort.InferenceSession(
                graph, options, providers=["CPUExecutionProvider"], enable_fallback=0
            )
        except Exception as exc:  # onnx and onnxruntime raise several types for a bad graph
            raise RknnError(MODEL_INVALID, f"the model's graph cannot be loaded: {exc}") from None
        self._keep = weights  # the program reads these bytes (in place, or once at load)
        weight_names = {name for name, _ in self.weight_views}
        self.input_names = [i.name for i in self.session.get_inputs() if i.name not in weight_names]
        self.output_names = [o.name for o in self.session.get_outputs()]
        expected_in = [t.name for t in meta.inputs]
        expected_out = [t.name for t in meta.outputs]
        self._check_types(meta)
        if self.input_names != expected_in or self.output_names != expected_out:
            raise RknnError(
                MODEL_INVALID,
                f"graph IO {self.input_names} -> {self.output_names} does not match the "
                f"metadata {expected_in} -> {expected_out}",
            )


def _fp16_blocked(graph: bytes, weights_given: tuple) -> fp16_layout.Blocked | None:
    """core/fp16_layout's graph for a float16 program (not an int8 one; RKNNRT_FP16_BLOCKED=0:
    never); None keeps `graph`, also where onnxruntime cannot lay it out (that failure is the
    plain session's to report, with the plain graph)."""
    if not switches.fp16_blocked() or any(op in graph for op in _INTEGER_OPS):
        return None  # (an int8 program's float16 islands keep their place)
    try:
        return fp16_layout.blocked_program(graph, lambda: session_options(graph), weights_given)
    except Exception:  # onnx and onnxruntime raise several types; the plain path decides
        return None


_ORT_TYPES = {
    "float32": "tensor(float)", "float16": "tensor(float16)", "int8": "tensor(int8)",
    "uint8": "tensor(uint8)", "int16": "tensor(int16)", "uint16": "tensor(uint16)",
    "int32": "tensor(int32)", "uint32": "tensor(uint32)", "int64": "tensor(int64)",
    "bool": "tensor(bool)",
}  # fmt: skip


def address_of(array: np.ndarray) -> int:
    """The address of an array's first byte (cheaper than array.ctypes.data)."""
    return array.__array_interface__["data"][0]


class Binding:
    """One context's IO binding: the program reads the context's input buffers in place and
    writes into output buffers allocated once, so a run converts nothing on the way."""

    def __init__(self, program: Program, inputs: list[np.ndarray], outputs: list[TensorSpec]):
        self._program = program
        self._io = program.session.io_binding()
        for name, array in [*zip(program.input_names, inputs), *program.weight_views]:
            self._io.bind_input(name, "cpu", 0, array.dtype, array.shape, address_of(array))
        self.outputs: list[np.ndarray] = []
        self.addresses: list[int] = []
        for spec in outputs:
            dtype = np.dtype(np.bool_) if spec.dtype == "bool" else np.dtype(spec.dtype)
            self.outputs.append(np.empty(spec.shape, dtype))
            self.addresses.append(0)
            self.replace_output(len(self.outputs) - 1)

    def replace_output(self, index: int) -> None:
        """Give output `index` a new buffer (the old one now belongs to whoever holds it)."""
        array = np.empty_like(self.outputs[index])
        name = self._program.output_names[index]
        address = address_of(array)
        self._io.bind_output(name, "cpu", 0, array.dtype, array.shape, address)
        self.outputs[index], self.addresses[index] = array, address

    def run(self) -> None:
        self._program.session.run_with_iobinding(self._io)
