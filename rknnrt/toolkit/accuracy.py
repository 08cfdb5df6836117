"""`RKNN.accuracy_analysis`: every stored tensor of the float ('golden') model against the built
program ('simulator'), written as the vendor writes it.

`output_dir/golden/<file>.txt` and `output_dir/simulator/<file>.txt` (one value per line) with
`npy/<file>.npy` beside them, `map_name_to_file.txt` and `error_analysis.txt` with per-tensor
'entire' (errors accumulated from the input) and 'single' (this layer alone, fed the golden
values) cosine and Euclidean distance. rknnrt adds the worst layers first (as `#` lines, so the
vendor's table is unchanged below them) and `error_analysis.png` when matplotlib is installed.
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from ..model import files, numerics
from .errors import ConversionError, engine_words
from .probe import cosine, probe_session

WORST_SHOWN = 5


@dataclass(frozen=True)
class TensorError:
    name: str
    op_type: str
    entire: tuple[float, float] | None  # (cosine, euclidean)
    single: tuple[float, float] | None


def euclidean(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a.astype(np.float64).ravel() - b.astype(np.float64).ravel()))


def _producers(model: onnx.ModelProto) -> dict[str, str]:
    return {o: n.op_type for n in model.graph.node for o in n.output if o}


def _program_feed(program: onnx.ModelProto, sample: Sequence[np.ndarray],
                  io_qparams: dict[str, tuple[float, int]]) -> dict[str, np.ndarray]:  # fmt: skip
    feed = {}
    for vi, x in zip(program.graph.input, sample):
        elem = vi.type.tensor_type.elem_type
        if elem == onnx.TensorProto.INT8 and vi.name in io_qparams:
            scale, zp = io_qparams[vi.name]
            feed[vi.name] = numerics.quantize(x, scale, zp)
        else:
            feed[vi.name] = x.astype(helper.tensor_dtype_to_np_dtype(elem))
    return feed


def _as_float(name: str, value: np.ndarray, io_qparams: dict) -> np.ndarray:
    if value.dtype == np.int8 and name in io_qparams:
        scale, zp = io_qparams[name]
        return numerics.dequantize(value, scale, zp)
    return value.astype(np.float32)


def _fake_quant(x: np.ndarray, qp: tuple[float, int] | None) -> np.ndarray:
    if qp is None:
        return x
    scale, zp = qp
    return numerics.fake_quantize(x, scale, zp)


def simulated_names(program: onnx.ModelProto, tensors: Sequence[str]) -> dict[str, str]:
    """Each golden tensor's value in the program: its dequantised (`__dq`) or float16-rounded
    (`__r`) copy, else the tensor itself (the program's naming, see quantize.py)."""
    produced = {o for n in program.graph.node for o in n.output} | \
        {i.name for i in program.graph.input}  # fmt: skip
    found = {}
    for t in tensors:
        for candidate in (f"{t}__dq", f"{t}__r", t):
            if candidate in produced:
                found[t] = candidate
                break
    return found


def single_layer_values(program: onnx.ModelProto, feed: dict[str, np.ndarray],
                        golden: dict[str, np.ndarray],
                        tensor_qparams: dict) -> dict[str, np.ndarray]:  # fmt: skip
    """Each quantised tensor computed from golden inputs: every QuantizeLinear of an
    intermediate reads a new graph input carrying the golden value, so each layer sees exact
    (then quantised) inputs and only its own error remains."""
    model = onnx.ModelProto()
    model.CopyFrom(program)
    graph = model.graph
    inputs = {i.name for i in graph.input}
    exposed: dict[str, str] = {}
    for node in graph.node:
        if node.op_type != "QuantizeLinear" or node.input[0] in inputs:
            continue
        source = node.input[0]
        base = source[: -len("__f")] if source.endswith("__f") else source
        if base not in golden or base not in tensor_qparams:
            continue
        node.input[0] = f"{base}__golden"
        graph.input.append(helper.make_tensor_value_info(
            f"{base}__golden", onnx.TensorProto.FLOAT, list(golden[base].shape)))  # fmt: skip
        exposed[base] = source
    if not exposed:
        return {}
    full_feed = dict(feed)
    full_feed.update({f"{b}__golden": golden[b].astype(np.float32) for b in exposed})
    values = probe_session(model, list(exposed.values())).run(list(exposed.values()), full_feed)
    return {base: _fake_quant(v.astype(np.float32), tensor_qparams.get(base))
            for base, v in zip(exposed, values)}  # fmt: skip


def analyse(float_program: onnx.ModelProto, program: onnx.ModelProto,
            sample: Sequence[np.ndarray], tensor_qparams: dict,
            io_qparams: dict) -> tuple[list[TensorError], dict, dict]:  # fmt: skip
    """Per-tensor errors, golden values and simulated values for one normalised sample."""
    producers = _producers(float_program)
    names = [i.name for i in float_program.graph.input] + \
        [o for n in float_program.graph.node for o in n.output if o]  # fmt: skip
    floats = [t for t in names if t not in {i.name for i in float_program.graph.input}]
    golden_values = probe_session(float_program, floats).run(
        floats, {i.name: x.astype(np.float32) for i, x in zip(float_program.graph.input, sample)})
    golden = dict(zip(floats, golden_values))
    golden.update({i.name: np.asarray(x, np.float32)
                   for i, x in zip(float_program.graph.input, sample)})  # fmt: skip
    golden = {t: v for t, v in golden.items() if v.dtype.kind == "f"}
    where = simulated_names(program, [t for t in names if t in golden])
    feed = _program_feed(program, sample, io_qparams)
    wanted = [w for w in where.values() if w not in feed]
    values = dict(zip(wanted, probe_session(program, wanted).run(wanted, feed))) if wanted else {}
    values.update(feed)
    simulated = {t: _as_float(w, values[w], io_qparams) for t, w in where.items()}
    singles = single_layer_values(program, feed, golden, tensor_qparams)
    for t in golden:  # inputs: their own quantisation is the whole 'single' error
        if t not in producers and t in simulated:
            singles[t] = simulated[t]
    errors = []
    for t in names:
        if t not in golden:
            continue
        entire = single = None
        if t in simulated and simulated[t].size == golden[t].size:
            entire = (cosine(golden[t], simulated[t]), euclidean(golden[t], simulated[t]))
            single = entire
        if t in singles and singles[t].size == golden[t].size:
            single = (cosine(golden[t], singles[t]), euclidean(golden[t], singles[t]))
        errors.append(TensorError(t, producers.get(t, "Input"), entire, single))
    return errors, golden, simulated


def file_name(tensor: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", tensor) + ".txt"


def _cell(pair: tuple[float, float] | None) -> str:
    return "" if pair is None else f"{pair[0]:.5f} | {pair[1]:.5f}"


def worst(errors: Sequence[TensorError], count: int = WORST_SHOWN) -> list[TensorError]:
    measured = [e for e in errors if e.single is not None and e.op_type != "Input"]
    return sorted(measured, key=lambda e: e.single[0])[:count]  # type: ignore[index]


def write(output_dir: str, errors: Sequence[TensorError], golden: dict, simulated: dict) -> str:
    """The vendor's snapshot folder; returns the error table's path."""
    for part, values in (("golden", golden), ("simulator", simulated)):
        os.makedirs(os.path.join(output_dir, part, "npy"), exist_ok=True)
        for e in errors:
            if e.name in values:
                name = file_name(e.name)
                array = np.asarray(values[e.name], np.float32)
                text, npy = io.StringIO(), io.BytesIO()
                np.savetxt(text, array.ravel(), fmt="%.6f")
                np.save(npy, array)
                files.write_atomic(os.path.join(output_dir, part, name), text.getvalue())
                files.write_atomic(
                    os.path.join(output_dir, part, "npy", name[:-4] + ".npy"), npy.getvalue()
                )
    files.write_atomic(
        os.path.join(output_dir, "map_name_to_file.txt"),
        f"{'layer_name':<27}{'file_name':<27}\n{'-' * 54}\n"
        + "".join(f"{e.name:<27}{file_name(e.name):<27}\n" for e in errors),
    )
    lines = ["# worst layers first (single-layer cosine, rknnrt):"]
    lines += [
        f"#   [{e.op_type}] {e.name}: single cos {e.single[0]:.5f}, "  # type: ignore
        f"entire cos {e.entire[0]:.5f}"
        for e in worst(errors)
    ]  # type: ignore
    lines += [
        "# simulator_error: the output error of each layer of the simulator (against 'golden').",
        "#   entire: the error accumulated from the input up to this layer.",
        "#   single: this layer alone, fed the golden values of its inputs.",
        "",
        f"{'layer_name':<36}{'simulator_error':<35}",
        f"{'':<32}{'entire':<20}{'single':<19}",
        f"{'':<29}{'cos':<9}{'euc':<11}{'cos':<9}{'euc':<10}",
        "-" * 67,
    ]
    for e in errors:
        label = f"[{e.op_type}] {e.name}"
        entire = _cell(e.entire)
        single = _cell(e.single) if entire else ""
        lines.append(f"{label:<26} {entire:<18} {single}".rstrip())
    path = os.path.join(output_dir, "error_analysis.txt")
    files.write_atomic(path, "\n".join(lines) + "\n")
    _plot(output_dir, errors)
    return path


def _plot(output_dir: str, errors: Sequence[TensorError]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    shown = [e for e in errors if e.entire is not None]
    fig, ax = plt.subplots(figsize=(max(6, len(shown) * 0.3), 4))
    ax.plot([e.entire[0] for e in shown], label="entire")  # type: ignore[index]
    ax.plot([e.single[0] for e in shown], label="single")  # type: ignore[index]
    ax.set_xticks(range(len(shown)), [e.name for e in shown], rotation=90, fontsize=6)
    ax.set_ylabel("cosine")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(output_dir, "error_analysis.png"))
    plt.close(fig)


def run(float_program: onnx.ModelProto, program: onnx.ModelProto, sample: Sequence[np.ndarray],
        tensor_qparams: dict, io_qparams: dict, output_dir: str) -> list[TensorError]:  # fmt: skip
    try:
        errors, golden, simulated = analyse(float_program, program, sample, tensor_qparams,
                                            io_qparams)  # fmt: skip
    except ConversionError:
        raise
    except Exception as exc:  # onnxruntime's errors come in several types
        raise ConversionError(
            f"accuracy analysis could not run the models: {engine_words(exc)}"
        ) from None
    try:
        path = write(output_dir, errors, golden, simulated)
    except OSError as exc:
        raise ConversionError(f"cannot write to {output_dir!r}: {exc}") from None
    for e in worst(errors, 3):
        sys.stderr.write(f"I worst layer: [{e.op_type}] {e.name} single cos "
                         f"{e.single[0]:.5f}\n")  # type: ignore[index]  # fmt: skip
    sys.stderr.write(f"I the error analysis results are in {path}\n")
    return errors
