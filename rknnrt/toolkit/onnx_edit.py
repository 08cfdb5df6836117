"""`rknn.utils.onnx_edit`: reshape/transpose a model's inputs and outputs by an equation, as
the vendor's utility does (examples/functions/onnx_edit), on onnx.

    onnx_edit(model, export_path, inputs_transform={name: eq}, outputs_transform={name: eq},
              dataset=None) -> 0 (-1 on failure, with one `E onnx_edit:` line)

An equation is `<original dims>-><new dims>`, optionally with `[x=2,y=8]` assignments after
the original side: each side is comma-separated groups of letters (a product of dims) or `1`.
Every letter of the original side appears once on the new side; the new side may add `1`s.
An input gets the new shape and Reshape/Transpose nodes that turn it back into the original
tensor; an output gets nodes that turn the original tensor into the new shape. With `dataset`,
the `.npy` files of transformed inputs are transformed too and written, with a new dataset
file `dataset_for_<export name>.txt`, next to `export_path`.
"""

from __future__ import annotations

import io
import os
import re
import sys
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..model import files
from .errors import ConversionError

_GROUP = re.compile(r"^(1|[a-z]+)$")


@dataclass
class Plan:
    """One equation applied to a shape: the letters' sizes and the three steps between the
    original and the new shape."""

    original: list[int]
    split: list[int]  # the original shape with every group split into its letters
    perm: list[int]  # split (original letter order) -> new letter order
    new: list[int]

    def forward(self, x: np.ndarray) -> np.ndarray:
        """original -> new (an output's transform; a dataset array's transform)."""
        return x.reshape(self.split).transpose(self.perm).reshape(self.new)

    def steps_forward(self) -> list[tuple[str, list[int]]]:
        return _steps(self.original, self.split, self.perm, self.new)

    def steps_backward(self) -> list[tuple[str, list[int]]]:
        moved = [self.split[p] for p in self.perm]
        return _steps(self.new, moved, list(np.argsort(self.perm)), self.original)


def _steps(start: list[int], split: list[int], perm: list[int], end: list[int]) -> list:
    steps: list[tuple[str, list[int]]] = []
    if split != start:
        steps.append(("Reshape", split))
    if perm != sorted(perm):
        steps.append(("Transpose", [int(p) for p in perm]))
    if end != [split[p] for p in perm]:
        steps.append(("Reshape", end))
    return steps


def parse(equation: str, shape: list[int | None], name: str) -> Plan:
    """The plan of `equation` for a tensor of `shape` (None: a dynamic dim)."""
    text = equation.replace(" ", "")
    assigned: dict[str, int] = {}
    found = re.search(r"\[([^\]]*)\]", text)
    if found:
        for item in filter(None, found.group(1).split(",")):
            key, _, value = item.partition("=")
            if not re.fullmatch(r"[a-z]", key) or not value.isdigit() or int(value) < 1:
                raise ConversionError(f"{name!r}: bad assignment {item!r} in {equation!r}")
            assigned[key] = int(value)
        text = text[: found.start()] + text[found.end() :]
    if text.count("->") != 1:
        raise ConversionError(f"{name!r}: {equation!r} needs one '->'")
    left, right = (side.split(",") for side in text.split("->"))
    for group in left + right:
        if not _GROUP.match(group):
            raise ConversionError(f"{name!r}: {equation!r}: group {group!r} may only hold "
                                  "letters a-z or be '1'")  # fmt: skip
    if len(left) != len(shape):
        raise ConversionError(f"{name!r} has {len(shape)} dims {shape}, {equation!r} names "
                              f"{len(left)}")  # fmt: skip
    letters = [c for g in left if g != "1" for c in g]
    if len(set(letters)) != len(letters):
        raise ConversionError(f"{name!r}: {equation!r} repeats a letter")
    sizes = dict(assigned)
    for group, dim in zip(left, shape):
        if group == "1":
            if dim not in (1, None):
                raise ConversionError(f"{name!r}: '1' given for a dim of {dim} in {equation!r}")
            continue
        unknown = [c for c in group if c not in sizes]
        known = int(np.prod([sizes[c] for c in group if c in sizes]))
        if dim is None:
            if unknown:
                raise ConversionError(
                    f"{name!r}: dynamic dims are only supported when every "
                    f"letter of their group is assigned ({equation!r})"
                )
            continue
        if len(unknown) > 1:
            raise ConversionError(
                f"{name!r}: {equation!r}: group {group!r} splits {dim} with "
                f"{len(unknown)} unassigned letters; assign all but one"
            )
        if unknown:
            if dim % known:
                raise ConversionError(f"{name!r}: {equation!r}: {dim} is not divisible by "
                                      f"{known} (group {group!r})")  # fmt: skip
            sizes[unknown[0]] = dim // known
        elif known != dim:
            raise ConversionError(f"{name!r}: {equation!r}: group {group!r} is {known}, the dim "
                                  f"is {dim}")  # fmt: skip
    new_letters = [c for g in right if g != "1" for c in g]
    if sorted(new_letters) != sorted(letters):
        missing = set(letters) ^ set(new_letters)
        raise ConversionError(f"{name!r}: {equation!r}: every letter must appear once on each "
                              f"side ({', '.join(sorted(missing)) or 'repeated'})")  # fmt: skip
    original = [int(np.prod([sizes[c] for c in g])) if g != "1" else 1 for g in left]
    split = [sizes[c] for c in letters] or [1]
    perm = [letters.index(c) for c in new_letters] or [0]
    new = [int(np.prod([sizes[c] for c in g])) if g != "1" else 1 for g in right]
    return Plan(original, split, perm, new)


def _shape_of(model: onnx.ModelProto, name: str, kind: str) -> list[int | None]:
    values = model.graph.input if kind == "input" else model.graph.output
    for vi in values:
        if vi.name == name:
            dims = vi.type.tensor_type.shape.dim
            return [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                    for d in dims]  # fmt: skip
    raise ConversionError(f"the model has no {kind} named {name!r} "
                          f"({', '.join(v.name for v in values)})")  # fmt: skip


def _nodes(steps: list, source: str, target: str, prefix: str) -> tuple[list, list]:
    nodes, inits = [], []
    current = source
    for k, (op, arg) in enumerate(steps):
        out = target if k == len(steps) - 1 else f"{prefix}_{k}"
        if op == "Reshape":
            shape = f"{prefix}_{k}_shape"
            inits.append(numpy_helper.from_array(np.array(arg, np.int64), shape))
            nodes.append(helper.make_node("Reshape", [current, shape], [out],
                                          name=f"{prefix}_{k}"))  # fmt: skip
        else:
            nodes.append(helper.make_node("Transpose", [current], [out], name=f"{prefix}_{k}",
                                          perm=arg))  # fmt: skip
        current = out
    if not steps:
        nodes.append(helper.make_node("Identity", [source], [target], name=f"{prefix}_0"))
    return nodes, inits


def _rename_uses(graph: onnx.GraphProto, old: str, new: str) -> None:
    for node in graph.node:
        node.input[:] = [new if i == old else i for i in node.input]
    for vi in graph.value_info:
        if vi.name == old:
            vi.name = new


def _set_dims(vi: onnx.ValueInfoProto, dims: list[int]) -> None:
    shape = vi.type.tensor_type.shape
    shape.ClearField("dim")
    for d in dims:
        shape.dim.add().dim_value = int(d)


def _describe(steps: list, start: list[int]) -> list[str]:
    lines, shape = [], list(start)
    for op, arg in steps:
        if op == "Reshape":
            lines.append(f"  - Reshape {shape} to {arg}")
            shape = list(arg)
        else:
            moved = [shape[p] for p in arg]
            lines.append(f"  - Transpose {shape} by {tuple(arg)} to {moved}")
            shape = moved
    return lines


def edit(model: onnx.ModelProto, inputs_transform: dict, outputs_transform: dict,
         log=lambda line: None) -> tuple[onnx.ModelProto, dict[str, Plan]]:  # fmt: skip
    """The edited copy and the plans of the transformed inputs."""
    edited = onnx.ModelProto()
    edited.CopyFrom(model)
    graph = edited.graph
    plans: dict[str, Plan] = {}
    front: list[onnx.NodeProto] = []
    for name, equation in (inputs_transform or {}).items():
        plan = parse(str(equation), _shape_of(edited, name, "input"), name)
        inner = f"{name}__onnx_edit"
        _rename_uses(graph, name, inner)
        steps = plan.steps_backward()
        nodes, inits = _nodes(steps, name, inner, f"{name}__in")
        front += nodes
        graph.initializer.extend(inits)
        _set_dims(next(vi for vi in graph.input if vi.name == name), plan.new)
        plans[name] = plan
        log(
            f"I For '{name}': '{equation}'\n  input '{name}' now has shape {plan.new} "
            f"(was {plan.original}); inserted:\n" + "\n".join(_describe(steps, plan.new))
        )
    for name, equation in (outputs_transform or {}).items():
        plan = parse(str(equation), _shape_of(edited, name, "output"), name)
        inner = f"{name}__onnx_edit"
        for node in graph.node:
            node.output[:] = [inner if o == name else o for o in node.output]
        _rename_uses(graph, name, inner)
        steps = plan.steps_forward()
        nodes, inits = _nodes(steps, inner, name, f"{name}__out")
        graph.node.extend(nodes)
        graph.initializer.extend(inits)
        _set_dims(next(vi for vi in graph.output if vi.name == name), plan.new)
        log(
            f"I For '{name}': '{equation}'\n  output '{name}' now has shape {plan.new} "
            f"(was {plan.original}); inserted:\n" + "\n".join(_describe(steps, plan.original))
        )
    existing = list(graph.node)
    graph.ClearField("node")
    graph.node.extend(front + existing)
    try:
        onnx.checker.check_model(edited)
    except onnx.checker.ValidationError as exc:
        raise ConversionError(f"the edited model is not valid ONNX: {exc}") from None
    return edited, plans


def _edit_dataset(dataset: str, model: onnx.ModelProto, plans: dict[str, Plan],
                  export_path: str) -> str:  # fmt: skip
    """The dataset with the transformed inputs' arrays transformed: the new file's path."""
    from .dataset import resolve

    names = [vi.name for vi in model.graph.input
             if vi.name not in {i.name for i in model.graph.initializer}]  # fmt: skip
    base = os.path.dirname(os.path.abspath(dataset))
    folder = os.path.dirname(os.path.abspath(export_path))
    stem = os.path.splitext(os.path.basename(export_path))[0]
    try:
        with open(dataset) as f:
            lines = [line.split() for line in f if line.strip()]
    except OSError as exc:
        raise ConversionError(f"cannot read dataset {dataset!r}: {exc}") from None
    out_lines = []
    for number, paths in enumerate(lines, 1):
        if len(paths) != len(names):
            raise ConversionError(f"{dataset} line {number}: {len(paths)} files for a model "
                                  f"with {len(names)} inputs")  # fmt: skip
        row = []
        for path, name in zip(paths, names):
            full = os.path.abspath(resolve(path, base))
            if name not in plans:
                row.append(os.path.relpath(full, folder))
                continue
            if not path.lower().endswith(".npy"):
                raise ConversionError(f"{dataset} line {number}: input {name!r} is transformed: "
                                      f"give a .npy file, not {path!r}")  # fmt: skip
            try:
                array = np.load(full, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise ConversionError(f"{dataset} line {number}: {exc}") from None
            plan = plans[name]
            if array.size != int(np.prod(plan.original)):
                raise ConversionError(f"{dataset} line {number}: {path!r} has shape "
                                      f"{list(array.shape)}, input {name!r} is "
                                      f"{plan.original}")  # fmt: skip
            target = f"{stem}_{os.path.splitext(os.path.basename(path))[0]}.npy"
            buffer = io.BytesIO()
            np.save(buffer, plan.forward(array.reshape(plan.original)))
            files.write_atomic(os.path.join(folder, target), buffer.getvalue())
            row.append(target)
        out_lines.append(" ".join(row))
    new_dataset = os.path.join(folder, f"dataset_for_{stem}.txt")
    files.write_atomic(new_dataset, "\n".join(out_lines) + "\n")
    return new_dataset


def onnx_edit(model, export_path, inputs_transform=None, outputs_transform=None,
              dataset=None) -> int:  # fmt: skip
    """The vendor's signature; 0 on success, -1 with one `E onnx_edit:` line on failure."""
    from . import onnx_import

    try:
        proto = onnx_import.load(model)
        edited, plans = edit(proto, inputs_transform or {}, outputs_transform or {},
                             lambda line: sys.stderr.write(line + "\n"))  # fmt: skip
        try:
            files.write_atomic(os.fspath(export_path), edited.SerializeToString())
        except OSError as exc:
            raise ConversionError(f"cannot write {os.fspath(export_path)!r}: {exc}") from None
        if dataset is not None and plans:
            written = _edit_dataset(os.fspath(dataset), proto, plans, os.fspath(export_path))
            sys.stderr.write(f"I onnx_edit: wrote {written}\n")
    except ConversionError as exc:
        sys.stderr.write(f"E onnx_edit: {exc}\n")
        return -1
    return 0
