"""A float16 program's roundings moved inside onnxruntime's blocked (NCHWc) layout: exact.

The toolkit's fp16 program rounds every stored tensor to float16 with a Cast pair (float32 ->
float16 -> float32). On x86, onnxruntime runs convolutions, pools, Concat and residual adds in
a blocked channel layout, and a Cast is not among the ops it keeps in that layout: around each
pair it reorders the tensor out and back in (SqueezeNet fp16: the reorders took 1.2 ms of
6.4, the Casts 0.8). A Cast is element-wise, so it gives the same values in either layout.

So the runtime lets onnxruntime lay out the program without the pairs (each rounded tensor a
graph output, so that no fusion reaches across it), then puts each pair back on the blocked
tensor the rounded one came from, and runs that graph with no further optimisation. Where the
blocked layout would give a reader of a rounded tensor another kernel than the toolkit's graph
does (a residual Add fused into a Conv, a blocked GlobalAveragePool or linear Resize: other
sums), it is kept from doing so. Outputs are bit-identical to the toolkit's graph
(tests/perf/test_fp16_layout.py, test_fp16_layout_arch.py); run time against
onnxruntime float32 on the re-drawn light models: SqueezeNet 1.29 -> 1.13, ResNet-50 1.20 ->
1.12, Inception v2 1.13 -> 1.05, DenseNet-121 1.05 -> 0.91 (benchmarks/quantized.py).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..lazy_imports import onnx
from . import fp16_blocked_ops, graph_edit

_FLOAT, _FLOAT16 = 1, 10  # onnx.TensorProto.FLOAT, FLOAT16


def rounding_pairs(graph) -> list[tuple]:
    """(first Cast, second Cast) of each float32 -> float16 -> float32 rounding whose float32
    source a node writes and only that Cast reads, and whose float16 value only the second
    Cast reads; none of the three a graph output (a graph output's own Cast stays)."""
    readers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    written = {out for node in graph.node for out in node.output}
    pairs = []
    for node in graph.node:
        if graph_edit.cast_to(node) != _FLOAT16 or node.input[0] not in written:
            continue
        source, half = node.input[0], node.output[0]
        after = readers.get(half, [])
        if (len(readers.get(source, [])) == 1 and source not in outputs and half not in outputs
                and len(after) == 1 and graph_edit.cast_to(after[0]) == _FLOAT
                and after[0].output[0] not in outputs):  # fmt: skip
            pairs.append((node, after[0]))
    return pairs


# Readers for which onnxruntime's blocked kernel computes otherwise than the plain (NCHW) one
# that the toolkit's graph gives them (there a rounded tensor is a Cast's plain output): a
# blocked GlobalAveragePool sums each channel in another order (65 of 96 float32 channel means
# differ, 96 channels of 56x56), a linear Resize becomes a blocked Upsample (align_corners: 13
# of 139,392 float16 values differ), a BatchNormalization a depthwise Conv. A tensor one of them
# reads keeps its pair where it is (MobileNetV3's SE pools: the Mul beside reads it plain too).
_PLAIN_READERS = frozenset({"GlobalAveragePool", "Resize", "Upsample", "BatchNormalization"})
_EXACT_RESIZE_MODES = (b"nearest",)  # a copy of one input value: the same in any layout


def _reads_plain(node, blocked_pools: bool) -> bool:
    if node.op_type not in _PLAIN_READERS or node.domain not in ("", "ai.onnx"):
        return False
    if blocked_pools and node.op_type == "GlobalAveragePool":
        return False  # fp16_blocked_ops runs it blocked, in the plain pool's order
    mode = next((a.s for a in node.attribute if a.name == "mode"), b"nearest")
    return node.op_type not in ("Resize", "Upsample") or mode not in _EXACT_RESIZE_MODES


# Ops onnxruntime may run in its blocked layout when an input is blocked (a Conv's output, or
# such an op's): only their outputs' pairs gain by moving. Others' stay where they are, so no
# fusion of the layout session reaches across their rounding (DeiT: a Mul by 0.125 of the
# attention's query, rounded, became the FusedMatMul's alpha, the rounding lost).
_BLOCKABLE = frozenset({
    "Add", "AveragePool", "BatchNormalization", "Cast", "Clip", "Concat", "Conv",
    "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid", "HardSwish", "LeakyRelu", "MaxPool",
    "Mul", "Relu", "Resize", "Sigmoid", "Sum", "Tanh", "Upsample",
})  # fmt: skip


def _blockable(graph) -> set[str]:
    """Tensors a Conv writes, or a _BLOCKABLE op from one of those (the Cast pairs included)."""
    found: set[str] = set()
    for node in graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in _BLOCKABLE:
            continue
        if node.op_type == "Conv" or found.intersection(node.input):
            found.update(node.output)
    return found


def movable_pairs(graph, blocked_pools: bool = False) -> list[tuple]:
    """The rounding pairs the blocked layout may take: rounding_pairs of _blockable tensors,
    but those whose rounded value a _PLAIN_READERS op reads (`blocked_pools`: a
    GlobalAveragePool is not one, fp16_blocked_ops.enabled())."""
    readers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    blockable = _blockable(graph)
    return [(first, second) for first, second in rounding_pairs(graph)
            if first.input[0] in blockable
            and not any(_reads_plain(n, blocked_pools)
                        for n in readers.get(second.output[0], []))]  # fmt: skip


def _without_pairs(model, pairs: list[tuple]) -> list[str]:
    """Drop the pairs; their readers read the unrounded source, which becomes a graph output.
    Returns the sources."""
    graph = model.graph
    dropped = {id(n) for pair in pairs for n in pair}
    back = {second.output[0]: first.input[0] for first, second in pairs}
    kept = [n for n in graph.node if id(n) not in dropped]
    for node in kept:
        for k, name in enumerate(node.input):
            if name in back:
                node.input[k] = back[name]
    del graph.node[:]
    graph.node.extend(kept)
    sources = [first.input[0] for first, _ in pairs]
    graph.output.extend(onnx.helper.make_empty_tensor_value_info(s) for s in sources)
    return sources


def _keep_sums_apart(model, sources: list[str]) -> int:
    """Every other input of an Add or Sum that reads a rounded source becomes a graph output, so
    that the blocked layout does not fuse that Add into the Conv writing it (a Conv with a Sum
    input adds the sum before its own accumulation: another order, other float32 bits). In
    the toolkit's graph the rounded input is a Cast's plain output, which onnxruntime never
    fuses across (MobileNetV3-small: 6 residual Adds fused, outputs off by up to 1.2e-4).
    Returns how many outputs were added (the layout drops them again)."""
    graph = model.graph
    wanted = set(sources)
    written = {out for node in graph.node for out in node.output}
    outputs = {o.name for o in graph.output}
    added = []
    for node in graph.node:
        if node.op_type not in ("Add", "Sum") or node.domain not in ("", "ai.onnx") \
                or not wanted.intersection(node.input):  # fmt: skip
            continue
        for name in node.input:
            if name in written and name not in wanted and name not in outputs:
                outputs.add(name)
                added.append(name)
    graph.output.extend(onnx.helper.make_empty_tensor_value_info(name) for name in added)
    return len(added)


def _with_pairs(model, sources: list[str], outputs: list[str]) -> list[str]:
    """Put a rounding pair back on each source, on its blocked form where onnxruntime made one
    (a ReorderOutput writes the source from it), and keep only the program's own outputs.
    Returns the sources whose rounded value nothing reads (a fusion of the layout session
    reached across the rounding: the graph is not the program's)."""
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    rounded: dict[str, str] = {}
    targets = []
    for source in sources:
        node = producer.get(source)
        target = node.input[0] if node is not None and node.op_type == "ReorderOutput" else source
        rounded[target] = f"{target}__fp16_r"
        targets.append(target)
    nodes = []
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name in rounded:
                node.input[k] = rounded[name]
        nodes.append(node)
        for out in node.output:
            if out in rounded:
                nodes.append(onnx.helper.make_node("Cast", [out], [f"{out}__fp16"], to=_FLOAT16))
                nodes.append(onnx.helper.make_node("Cast", [f"{out}__fp16"], [rounded[out]],
                                                   to=_FLOAT))  # fmt: skip
    wanted = set(outputs)
    keep = [o for o in graph.output if o.name in wanted]
    del graph.output[:]
    graph.output.extend(keep)
    # drop what nothing reads any more (the sources' own ReorderOutputs)
    graph_edit.set_nodes(graph, graph_edit.live_nodes(graph, nodes))
    read = {name for node in graph.node for name in node.input}
    return [source for source, target in zip(sources, targets) if rounded[target] not in read]


# Activations onnxruntime fuses into the Conv before it: all but HardSwish also when their
# output is a graph output (the layout's blocked Conv fuses them itself). HardSwish has no CPU
# kernel: its fusion into a FusedConv is skipped when its output is a graph output, and it
# then runs as its function body, HardSigmoid and Mul, two passes over the tensor in the
# layout session's graph that the toolkit's graph does not make (MobileNetV3-small: 28 of
# them, 6.8 of 35 ms, one thread).
_FUSED_HERE = frozenset({"HardSwish"})
_MS_DOMAIN = "com.microsoft"


def _fuse_conv_activations(model, sources: list[str]) -> int:
    """Conv -> HardSwish whose output is a rounded source (now a graph output) as the one
    FusedConv onnxruntime makes of them in the toolkit's graph (where that output is read by
    its Cast). Returns how many were fused."""
    graph = model.graph
    wanted = set(sources)
    producer = {out: node for node in graph.node for out in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    outputs = {o.name for o in graph.output}
    replace: dict[int, list] = {}
    removed: set[int] = set()
    for act in graph.node:
        if act.op_type not in _FUSED_HERE or act.domain not in ("", "ai.onnx") \
                or act.output[0] not in wanted:  # fmt: skip
            continue
        conv = producer.get(act.input[0])
        if (conv is None or conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx")
                or readers.get(conv.output[0]) != 1 or conv.output[0] in outputs):  # fmt: skip
            continue
        fused = onnx.helper.make_node("FusedConv", list(conv.input), list(act.output),
                                      name=f"{conv.name or conv.output[0]}__fused",
                                      domain=_MS_DOMAIN, activation=act.op_type)  # fmt: skip
        fused.attribute.extend(conv.attribute)
        replace[id(act)] = [fused]
        removed.add(id(conv))
    if not replace:
        return 0
    graph_edit.set_nodes(graph, graph_edit.splice(graph, replace, removed))
    if not any(o.domain == _MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid(_MS_DOMAIN, 1))
    return len(replace)


class Blocked(NamedTuple):
    """A laid-out program: its graph (small: the constants are external) and the bytes of the
    one external-data file its constants are read from (`add_external_initializers_from_
    files_in_memory(DATA_FILE, data)`)."""

    graph: bytes
    data: np.ndarray


# The laid-out constants (the weights, re-laid for the blocked layout) are written to one
# external file and handed back as bytes: parsing and re-serialising them inside the graph
# took ~1.1 s of a 3.7 s rknn_init of ResNet-50 fp16 (onnx.load 0.4 s, SerializeToString
# 0.7 s) on this machine.
DATA_FILE = "laid_out.bin"
# The session that lays the program out is never run: its weights are not pre-packed for its
# kernels (onnxruntime packs them after it has written the optimised graph, which is the same
# either way; ResNet-50 fp16: ~0.1 s of CPU of a cold rknn_init's ~0.45).
LAYOUT_SESSION_CONFIG = {
    "session.optimized_model_external_initializers_file_name": DATA_FILE,
    "session.optimized_model_external_initializers_min_size_in_bytes": "256",
    "session.disable_prepacking": "1",
}


def may_lay_out(graph: bytes) -> bool:
    """False where a graph has no Cast or no Conv (nothing to move: not parsed)."""
    return b"Cast" in graph and b"Conv" in graph


def blocked_program(graph: bytes, open_program: Callable[..., object],
                    initializers: tuple[list[str], list] | None) -> Blocked | None:  # fmt: skip
    """The program with its rounding pairs inside onnxruntime's blocked layout, laid out for
    this CPU (run it with graph optimisation off and `data` as its external file), or None
    where there is nothing to move or onnxruntime does not lay it out (the caller keeps
    `graph`). `open_program(graph, **options)`: how the program's sessions are opened;
    `initializers`: the weights the session is given."""
    if not may_lay_out(graph):
        return None
    kept: set[str] = set()
    blocked_ops = fp16_blocked_ops.enabled()
    for _ in range(_ATTEMPTS):
        model = onnx.load_model_from_string(bytes(graph))
        pairs = [p for p in movable_pairs(model.graph, blocked_ops) if p[0].input[0] not in kept]
        if not pairs:
            return None
        laid_out = _lay_out(model, pairs, open_program, initializers, blocked_ops)
        if laid_out is None:
            return None
        lost = laid_out[1]
        if not lost:
            return laid_out[0]
        kept.update(lost)  # lay out again with those pairs where they are
    return None


_ATTEMPTS = 3


def _lay_out(model, pairs: list[tuple], open_program: Callable[..., object],
             initializers: tuple[list[str], list] | None, blocked_ops: bool
             ) -> tuple[Blocked, list[str]] | None:  # fmt: skip
    """blocked_program with these pairs moved; also the sources whose rounding was lost.
    `blocked_ops`: the pools and gates then run on fp16_blocked_ops' kernels."""
    outputs = [o.name for o in model.graph.output]
    sources = _without_pairs(model, pairs)
    _keep_sums_apart(model, sources)
    _fuse_conv_activations(model, sources)
    with tempfile.TemporaryDirectory(prefix="rknnrt_fp16_") as folder:
        path = os.path.join(folder, "laid_out.onnx")
        # (its remaining pairs kept as Casts: the layout is cached whether or not a later
        # init can build rknnrt's rounding kernel, fp16_round.py)
        open_program(model.SerializeToString(), optimise=True, optimized_model_path=path,
                     initializers=initializers, config=LAYOUT_SESSION_CONFIG,
                     round_in_one_pass=False)  # fmt: skip
        laid_out = onnx.load(path, load_external_data=False)
        data_path = os.path.join(folder, DATA_FILE)
        # mapped, not read: onnxruntime reads each page once at the session build (the
        # mapping outlives the folder's removal)
        data = np.memmap(data_path, np.uint8, mode="r") if os.path.exists(data_path) and \
            os.path.getsize(data_path) else np.zeros(0, np.uint8)  # fmt: skip
    if not any(n.domain == "com.microsoft.nchwc" for n in laid_out.graph.node):
        return None  # no blocked layout on this CPU: nothing gained
    lost = _with_pairs(laid_out, sources, outputs)
    if blocked_ops:
        fp16_blocked_ops.rewrite(laid_out)
    return Blocked(laid_out.SerializeToString(), data), lost


def constants(blocked: Blocked) -> tuple[list[str], list[np.ndarray]] | None:
    """The laid-out graph's external constants as views of `blocked.data` (names, arrays), for
    the session to read in place (`initializers`): handing onnxruntime the data as an
    in-memory file made it copy all of it (ResNet-50 fp16: 100 MB, ~40 ms of a cold init).
    None where an entry does not lie within the data as its type and shape say (the caller
    then hands the data over as the file)."""
    model = onnx.load_model_from_string(blocked.graph)
    names, arrays = [], []
    for tensor in model.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        entry = {e.key: e.value for e in tensor.external_data}
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
            offset, length = int(entry.get("offset", "0")), int(entry["length"])
        except (KeyError, ValueError, TypeError):
            return None
        shape = tuple(tensor.dims)
        if (entry.get("location") != DATA_FILE or offset < 0 or offset % dtype.itemsize
                or offset + length > blocked.data.size
                or length != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize):  # fmt: skip
            return None
        names.append(tensor.name)
        arrays.append(blocked.data[offset : offset + length].view(dtype).reshape(shape))
    return names, arrays
