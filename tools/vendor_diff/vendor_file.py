"""Per-layer comparison of a vendor .rknn file with the vendor's simulator (issue 24, item 4).

    python -m tools.vendor_diff.vendor_file FILE_OR_DIR ... [--layers DIR] [--per-op]

rknnrt rebuilds the file's int8 program (model/vendor_rknn); every stored int8 tensor the
simulator also rounds is fed the simulator's own value (recorded by arch_layers.py in the
vendor's environment: `<stem>.npz` in --layers, default tests/vendor/fixtures_arch/layers), so
each op computes from exactly the simulator's inputs (`<model>_i8.npz` serves every platform
whose file has no dump of its own) and only its own difference remains.
Per op: how many output elements differ from the simulator's, and how many of those are not
rounding ties (rknnrt's value before rounding more than 0.02 steps from a .5: compare.off_tie),
the same metric as tools/vendor_diff for rknnrt's own conversions.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto
from onnx import helper as oh

from rknnrt.model.errors import VendorFormatError
from rknnrt.model.vendor_rknn import fileformat, rebuild, registry
from rknnrt.model.vendor_rknn.fileformat import CONST_KINDS
from rknnrt.model.vendor_rknn.graph import GraphBuilder, is_helper

from .compare import off_tie

LAYERS = Path(__file__).resolve().parents[2] / "tests" / "vendor" / "fixtures_arch" / "layers"
# the simulator's names for rknnrt's tensors: the same, or the IO copy `<name>_int8`
SIM_SUFFIXES = ("", "_int8")


@dataclass
class OpRow:
    op_type: str
    node: str
    tensor: str
    elements: int
    differ: int
    off_tie: int
    max_steps: int


def load_layers(path: Path) -> dict[str, dict]:
    """tensor name -> {scale, zp, rounded, shape, q (int8, where rounded)}."""
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(bytes(data["meta"]).decode())
        for name, entry in meta.items():
            if f"q/{name}" in data.files:
                entry["q"] = data[f"q/{name}"]
    return meta


def _sim_value(t: fileformat.Tensor, layers: dict[str, dict]) -> np.ndarray | None:
    """The simulator's int8 value of `t`, if it rounds `t` with t's own parameters (the
    same build) and in t's shape (ignoring size-1 dims)."""
    for suffix in SIM_SUFFIXES:
        entry = layers.get(t.name + suffix)
        if entry is None or "q" not in entry or not t.scale:
            continue
        same = abs(entry["scale"] - t.scale[0]) <= 1e-6 * t.scale[0] and \
            entry["zp"] == (t.zp[0] if t.zp else 0)  # fmt: skip
        q = entry["q"]
        if same and [d for d in q.shape if d != 1] == [d for d in t.shape if d != 1]:
            return q.reshape(t.shape)
    return None


def per_layer(buf: bytes, layers: dict[str, dict]) -> list[OpRow]:
    """Each int8 op's agreement with the simulator, fed the simulator's own inputs. An op
    whose output the simulator does not round with the file's parameters (a fused
    intermediate, or rk3576's conv writing at its Concat's scale) is not compared; its
    consumers then read rknnrt's own value of it."""
    m = fileformat.parse(memoryview(buf))
    b, ins, _ = rebuild.rebuild(m)
    rebuild.place_weights(b, bytearray(0))  # (inline every weight)
    graph = b.model.graph
    producers = {node.output[0]: node for node in graph.node if node.op_type == "QuantizeLinear"}
    feed, exposed = {}, {}
    for t in m.tensors:
        if t.index not in b.int8_values:
            continue
        sim = _sim_value(t, layers)
        if sim is None:
            continue
        if t.index in m.inputs:  # an int8 graph input (the graph's uint8 copy follows it)
            feed[t.name] = sim.astype(np.int8)
            continue
        q_name = b.int8_values[t.index][0]
        node = producers.get(q_name)
        if node is not None:  # the op's own value, before and after rounding
            node.output[0] = f"{q_name}__own"
            exposed[t.index] = (node.input[0], node.output[0], sim)
        # (an int8 tensor the graph holds as uint8 on the same grid: q + 128, GraphBuilder.store)
        offset, elem = (128, TensorProto.UINT8) if t.index in b.unsigned else (0, TensorProto.INT8)
        if q_name not in {i.name for i in graph.input}:
            graph.input.append(oh.make_tensor_value_info(q_name, elem, list(t.shape)))
        feed[q_name] = (sim.astype(np.int16) + offset).astype(np.uint8 if offset else np.int8)
    kept = [t for t in m.tensors if t.index in b.int8_values and t.index not in exposed and
            layers.get(t.name, {}).get("rounded") is False]  # fmt: skip
    for t in kept:  # stored as int8, but the simulator keeps it in float: read unrounded
        _read_unrounded(b, t, producers)
    for t in ins:  # a float input the simulator quantised: its dequantised value
        if t.name not in feed:
            sim = _sim_value(t, layers)
            if sim is None:
                raise VendorFormatError(f"no simulator value of input '{t.name}'")
            feed[t.name] = ((sim.astype(np.float32) - (t.zp[0] if t.zp else 0))
                            * np.float32(t.scale[0])).astype(np.float32)  # fmt: skip
    names = [n for raw, own, _ in exposed.values() for n in (raw, own)]
    graph.output.extend(oh.make_empty_tensor_value_info(n) for n in names)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    # every op in float32 between its DequantizeLinear and QuantizeLinear (the rule measured)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(b.model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    values = dict(zip(names, session.run(names, feed)))
    writer = {i: n for n in m.nodes for i in n.outputs}
    rows = []
    for index, (raw, own, sim) in exposed.items():
        t, n = m.tensors[index], writer[index]
        exact = values[raw].astype(np.float64) / np.float32(t.scale[0]) + (t.zp[0] if t.zp else 0)
        ours = values[own].astype(np.int16) - (128 if index in b.unsigned else 0)
        steps = np.abs(ours - sim.astype(np.int16))
        rows.append(OpRow(n.op_type, n.name, t.name, int(sim.size), int(np.count_nonzero(steps)),
                          off_tie(sim, ours, exact), int(steps.max(initial=0))))  # fmt: skip
    return rows


def _read_unrounded(b: GraphBuilder, t: fileformat.Tensor,
                    producers: dict[str, onnx.NodeProto]) -> None:  # fmt: skip
    """Where the file stores `t` as int8 but the simulator keeps it in float (rk3576's conv
    before a standalone exGelu: its config's `qmode: replace`, float32), the ops reading `t`
    read the value before its rounding (computed from the simulator's inputs like any op's),
    so that they compute from the simulator's own kind of input; `t` itself is not compared."""
    node = producers.get(b.int8_values[t.index][0])
    if node is None:
        return
    readers = {b.values.get(t.index), b.conv_inputs.get(t.index)} - {None}
    for reader in b.model.graph.node:
        reader.input[:] = [node.input[0] if i in readers else i for i in reader.input]


def pre_activation(buf: bytes, layers: dict[str, dict], op: str) -> np.ndarray:
    """rknnrt's value of op `op`'s convolution before the activation fused after it (the
    output of the Conv its decoder writes; a tensor the file does not store), the op alone
    fed the simulator's int8 inputs: for comparison with the simulator's own rounding of it."""
    m = fileformat.parse(memoryview(buf))
    n = next(n for n in m.nodes if n.name == op)
    b = GraphBuilder(m)
    feed = {}
    for t in (m.tensors[i] for i in n.inputs):
        if t.kind in CONST_KINDS or is_helper(t):
            continue
        sim = _sim_value(t, layers)
        if sim is None:
            raise VendorFormatError(f"no simulator value of input '{t.name}'")
        b.int8_values[t.index] = (t.name, b.const(np.array(t.scale[0], np.float32), "scale"),
                                  b.const(np.array(t.zp[0], np.int8), "zp"))  # fmt: skip
        b.graph.input.append(oh.make_tensor_value_info(t.name, TensorProto.INT8, list(t.shape)))
        feed[t.name] = sim.astype(np.int8)
    registry.lookup(n).decode(b, n)
    conv = [x for x in b.nodes if x.op_type == "Conv"][-1].output[0]
    rebuild.place_weights(b, bytearray(0))
    b.model.opset_import.add(domain="", version=rebuild.OPSET)
    b.graph.node.extend(b.nodes)
    b.graph.output.append(oh.make_empty_tensor_value_info(conv))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(b.model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    return np.asarray(session.run([conv], feed)[0], np.float64)


def sim_float(layers: dict[str, dict], name: str) -> np.ndarray:
    """The simulator's value of tensor `name` (on its own int8 grid), dequantised."""
    entry = layers[name]
    return (entry["q"].astype(np.float64) - entry["zp"]) * entry["scale"]


def layer_path(layers_dir: Path, stem: str) -> Path | None:
    """The simulator's dump for `<model>_<platform>_i8`: its own, else the model's."""
    if not stem.endswith("_i8"):
        return None
    for name in (stem, f"{stem.rsplit('_', 2)[0]}_i8"):  # (a probe: its own)
        if (layers_dir / f"{name}.npz").exists():
            return layers_dir / f"{name}.npz"
    return None


def stored_ops(buf: bytes) -> int:
    """How many ops of the file write an int8 feature or output tensor."""
    m = fileformat.parse(memoryview(buf))
    return sum(any(m.tensors[i].qnt_type == "int8" and m.tensors[i].kind in (2, 3)
                   and not m.tensors[i].name.endswith("_exSecondary") for i in n.outputs)
               for n in m.nodes)  # fmt: skip


def table(paths: list[Path], layers_dir: Path, per_op: bool = False) -> str:
    lines = ["| file | int8 ops compared (of stored) | ops with off-tie differences | "
             "elements differing | of them not ties | max steps |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    detail = []
    for path in paths:
        layer_file = layer_path(layers_dir, path.stem)
        if layer_file is None:
            continue
        try:
            rows = per_layer(path.read_bytes(), load_layers(layer_file))
        except VendorFormatError as e:
            lines.append(f"| {path.stem} | refused: {str(e).removeprefix('vendor .rknn model: ')} "
                         "| | | | |")  # fmt: skip
            continue
        bad = [r for r in rows if r.off_tie]
        stored = stored_ops(path.read_bytes())
        lines.append(f"| {path.stem} | {len(rows)} ({stored}) | {len(bad)} | "
                     f"{sum(r.differ for r in rows)} | {sum(r.off_tie for r in rows)} | "
                     f"{max((r.max_steps for r in rows), default=0)} |")  # fmt: skip
        for r in rows if per_op else bad:
            detail.append(f"  {path.stem}: {r.op_type} '{r.node}' -> {r.tensor}: {r.differ} of "
                          f"{r.elements} differ, {r.off_tie} not ties, max {r.max_steps} steps")
    return "\n".join(lines + ([""] + detail if detail else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.vendor_diff.vendor_file")
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--layers", default=str(LAYERS))
    parser.add_argument("--per-op", action="store_true", help="list every op, not only those "
                        "with differences that are not ties")  # fmt: skip
    args = parser.parse_args(argv)
    files: list[Path] = []
    for p in map(Path, args.paths):
        files += sorted(p.glob("*.rknn")) if p.is_dir() else [p]
    print(table(files, Path(args.layers), args.per_op))
    return 0


if __name__ == "__main__":
    sys.exit(main())
