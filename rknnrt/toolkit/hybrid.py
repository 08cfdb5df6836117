"""Hybrid quantisation's files, as the vendor names them: `<name>.model`, `<name>.data` and
`<name>.quantization.cfg`.

- `.model`: the prepared float graph (ONNX), with the configuration it was prepared under as
  the metadata entry `rknnrt.config` (JSON).
- `.data`: the normalised calibration samples (a numpy `.npz`, read with allow_pickle=False).
- `.quantization.cfg`: the vendor's YAML layout: `custom_quantize_layers` (layer name ->
  `float16`, the layers to keep in float) and `quantize_parameters` (per tensor: qtype,
  qmethod, dtype, min, max, scale, zero_point, ori_min, ori_max). Users edit it between the
  steps. It is read by a small parser of that YAML subset whose scalars are Python literals
  (`ast.literal_eval`): nothing in it is ever executed.
"""

from __future__ import annotations

import ast
import json
import weakref
import zipfile
from collections.abc import Sequence
from typing import IO, Any

import numpy as np
import onnx

from ..model import files, numerics
from .dataset import Samples
from .errors import ConversionError

CONFIG_KEY = "rknnrt.config"


def _scalar(text: str) -> Any:
    text = text.strip()
    if text in ("", "~", "null"):
        return None
    if text in ("true", "True"):
        return True
    if text in ("false", "False"):
        return False
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text.strip("'\"")


def parse_cfg(text: str, source: str = "cfg") -> dict[str, Any]:
    """The YAML subset the cfg uses: nested mappings by indentation, `- item` lists of
    scalars, `{}` / `[]` / `[a, b]` flow values, `#` comments."""
    root: dict[str, Any] = {}
    stack: list[tuple[int, Any]] = [(-1, root)]
    pending: tuple[int, dict, str] | None = None  # a key whose value is on the next lines
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        body = line.strip()
        if pending is not None:
            p_indent, p_parent, p_key = pending
            item = body.startswith("-")
            if indent > p_indent or (item and indent == p_indent):  # YAML allows both
                p_parent[p_key] = [] if item else {}
                stack.append((indent, p_parent[p_key]))
            pending = None
        while stack and (indent < stack[-1][0] or (
                isinstance(stack[-1][1], list) and not body.startswith("-"))):  # fmt: skip
            stack.pop()
        if not stack:
            raise ConversionError(f"{source} line {number}: bad indentation")
        container = stack[-1][1]
        if body.startswith("-"):
            if not isinstance(container, list):
                raise ConversionError(f"{source} line {number}: a list item where a key was "
                                      "expected")  # fmt: skip
            container.append(_scalar(body[1:]))
            continue
        if ":" not in body or not isinstance(container, dict):
            raise ConversionError(f"{source} line {number}: expected 'key: value', got "
                                  f"{body!r}")  # fmt: skip
        key, _, value = body.partition(":")
        key = str(_scalar(key)) if key.strip() else key
        if value.strip():
            container[key] = _scalar(value)
        else:
            container[key] = None
            pending = (indent, container, key)
    return root


def _yaml_value(value: Any) -> str:
    return "[]" if isinstance(value, list) and not value else repr(value)


def format_cfg(float_layers: Sequence[str], params: dict[str, dict[str, Any]]) -> str:
    lines = ["# rknnrt hybrid quantisation: list layers to keep in float under",
             "# custom_quantize_layers as '<layer name>: float16'; edit min/max or",
             "# scale/zero_point of a tensor to override its quantisation."]  # fmt: skip
    if float_layers:
        lines.append("custom_quantize_layers:")
        lines += [f"    {name}: float16" for name in float_layers]
    else:
        lines.append("custom_quantize_layers: {}")
    lines.append("quantize_parameters:")
    for tensor, fields in params.items():
        lines.append(f"    {tensor}:")
        for key, value in fields.items():
            if isinstance(value, list) and value:
                lines.append(f"        {key}:")
                lines += [f"        -   {v!r}" for v in value]
            else:
                lines.append(f"        {key}: {_yaml_value(value)}")
    return "\n".join(lines) + "\n"


def tensor_params(tensor_qparams: dict[str, tuple[float, int]]) -> dict[str, dict[str, Any]]:
    """The cfg entries of the int8 tensors: the range a (scale, zp) pair represents."""
    out = {}
    for name, (scale, zp) in tensor_qparams.items():
        lo, hi = numerics.represented_range(scale, zp)
        out[name] = {"qtype": "asym", "qmethod": "layer", "dtype": "int8", "min": [float(lo)],
                     "max": [float(hi)], "scale": [float(scale)], "zero_point": [int(zp)],
                     "ori_min": [float(lo)], "ori_max": [float(hi)]}  # fmt: skip
    return out


def read_cfg(path: str) -> tuple[list[str], dict[str, tuple[float, int]]]:
    """(layers to keep in float, (scale, zp) per int8 tensor) from a user-edited cfg. A tensor
    whose min/max no longer match its scale/zero_point gets them from min/max."""
    try:
        with open(path) as f:
            cfg = parse_cfg(f.read(), path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversionError(f"cannot read {path!r}: {exc}") from None
    layers = cfg.get("custom_quantize_layers") or {}
    if not isinstance(layers, dict):
        raise ConversionError(f"{path}: custom_quantize_layers must map layer names to float16")
    bad = {k: v for k, v in layers.items() if v not in ("float16", "float32")}
    if bad:
        raise ConversionError(f"{path}: custom_quantize_layers may only say float16: {bad}")
    params = cfg.get("quantize_parameters") or {}
    if not isinstance(params, dict):
        raise ConversionError(f"{path}: quantize_parameters must map tensor names to their "
                              "parameters")  # fmt: skip
    overrides = {}
    for name, fields in params.items():
        if not isinstance(fields, dict) or fields.get("dtype") != "int8":
            continue
        try:
            scale, zp = float(fields["scale"][0]), int(fields["zero_point"][0])
            lo, hi = float(fields["min"][0]), float(fields["max"][0])
        except (KeyError, IndexError, TypeError, ValueError):
            raise ConversionError(f"{path}: tensor {name!r} needs min, max, scale and "
                                  "zero_point lists") from None  # fmt: skip
        ends = numerics.represented_range(scale, zp)
        if not np.isclose(lo, ends[0], rtol=1e-5, atol=1e-7) or \
                not np.isclose(hi, ends[1], rtol=1e-5, atol=1e-7):  # fmt: skip
            if hi <= lo:
                raise ConversionError(f"{path}: tensor {name!r} has max <= min")
            scale, zp = numerics.affine_params(lo, hi)
        overrides[name] = (scale, zp)
    return list(layers), overrides


def write_model(path: str, model: onnx.ModelProto, config: dict[str, Any]) -> None:
    stored = onnx.ModelProto()
    stored.CopyFrom(model)
    entry = stored.metadata_props.add()
    entry.key, entry.value = CONFIG_KEY, json.dumps(config)
    files.write_atomic(path, stored.SerializeToString())


def read_model(path: str) -> tuple[onnx.ModelProto, dict[str, Any] | None]:
    try:
        model = onnx.load_model_from_string(files.read_bytes(path))
    except Exception as exc:  # protobuf and OS errors
        raise ConversionError(f"cannot read hybrid model {path!r}: {exc}") from None
    config = None
    for entry in list(model.metadata_props):
        if entry.key == CONFIG_KEY:
            config = json.loads(entry.value)
            model.metadata_props.remove(entry)
    return model, config


def write_data(path: str, samples: Sequence[Sequence[np.ndarray]]) -> None:
    """The samples as a numpy .npz (the members np.savez writes: s<k>_i<i>.npy), written one
    array at a time: a streamed dataset is never held in memory."""

    def write(f: IO[bytes]) -> None:
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for k, sample in enumerate(samples):
                for i, x in enumerate(sample):
                    name = f"s{k}_i{i}.npy"
                    with archive.open(name, "w", force_zip64=True) as member:  # atomic: temp file
                        np.lib.format.write_array(member, np.asarray(x, np.float32),
                                                  allow_pickle=False)  # fmt: skip

    files.write_atomic_with(path, write)


def read_data(path: str, n_inputs: int) -> Samples:
    """The samples of a .data file, each read when it is used: the archive stays open while
    the samples are in use and is closed with them."""
    where = f"cannot read hybrid data {path!r}"
    try:
        f = files.open_regular(path)
    except OSError as exc:
        raise ConversionError(f"{where}: {exc}") from None
    try:
        data = np.load(f, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("not a .npz archive")
        count = len(data.files) // max(n_inputs, 1)
        keys = [[f"s{k}_i{i}" for i in range(n_inputs)] for k in range(count)]
        names = set(data.files)
        missing = next((key for row in keys for key in row if key not in names), None)
        if missing is not None:
            raise ValueError(f"no array {missing!r} (not written by step 1)")
    except (OSError, ValueError, EOFError) as exc:
        f.close()
        raise ConversionError(f"{where}: {exc}") from None

    def read(k: int) -> list[np.ndarray]:
        try:
            return [data[key] for key in keys[k]]
        except (OSError, ValueError, KeyError) as exc:
            raise ConversionError(f"{where}: {exc}") from None

    weakref.finalize(read, f.close)  # when no view of the samples is left
    return Samples(read, range(count))


def layers_between(model: onnx.ModelProto, start: str, end: str) -> list[str]:
    """Names of the nodes of the subgraph between tensor `start` and tensor `end`
    (custom_hybrid): the nodes that depend on `start` and that `end` depends on, from the
    consumers of `start` to the producer of `end`. Either may also name a node (then that node
    is included). Layers feeding the subgraph from elsewhere are not part of it."""
    nodes = list(model.graph.node)
    producers = {o: n for n in nodes for o in n.output}
    tensors = {t for n in nodes for t in (*n.input, *n.output)}
    tensors |= {i.name for i in model.graph.input}
    # a tensor name first (what the vendor's examples give); a node's name otherwise
    by_name = {n.name: n for n in nodes if n.name not in tensors}
    if start not in tensors and start not in by_name:
        raise ConversionError(f"custom_hybrid: no tensor or layer named {start!r}")
    start_tensors = set(by_name[start].output) if start in by_name else {start}
    if end in producers:
        last = producers[end]
    elif end in by_name:
        last = by_name[end]
    else:
        raise ConversionError(f"custom_hybrid: tensor {end!r} is not produced by any layer")
    downstream: set[int] = set()  # nodes reached from start
    reached = set(start_tensors)
    for k, node in enumerate(nodes):  # graph order is topological
        if reached.intersection(node.input):
            downstream.add(k)
            reached.update(node.output)
    upstream: set[int] = set()  # nodes end depends on
    index = {id(n): k for k, n in enumerate(nodes)}
    stack = [last]
    while stack:
        node = stack.pop()
        k = index[id(node)]
        if k in upstream:
            continue
        upstream.add(k)
        stack.extend(producers[i] for i in node.input if i in producers)
    chosen = downstream & upstream
    if start in by_name:
        chosen.add(index[id(by_name[start])])
    if not chosen & downstream and start not in by_name:
        raise ConversionError(f"custom_hybrid: no path from {start!r} to {end!r}")
    return [nodes[k].name for k in sorted(chosen)]
