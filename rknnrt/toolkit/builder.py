"""`RKNN.build`'s pipeline: prepare the graph, quantise or round to float16, lower to a file.

Kept apart from the `RKNN` facade so that build, hybrid quantisation step 2 and automatic
hybrid quantisation run the same steps.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from ..model import container, targets
from . import custom_ops, lower, onnx_import, passes, quantize
from . import dataset as datasets
from .config import Config
from .errors import ConversionError, engine_words

TOOLKIT_VERSION = "0.1.0"
# onnxruntime (and rknnrt's passes) work from opset 11 on; older models are upgraded to this.
UPGRADE_OPSET = 13
MIN_OPSET = 11


@dataclass
class Built:
    """A build's results: the model file and what accuracy analysis and hybrid steps need."""

    model_bytes: bytes
    float_program: onnx.ModelProto  # the prepared float32 graph (the 'golden' model)
    program: onnx.ModelProto  # what the runtime executes (QDQ, float16-rounded or float32)
    dtype: str  # 'int8', 'float16' or 'float32'
    tensor_qparams: dict[str, tuple[float, int]] = field(default_factory=dict)
    io_qparams: dict[str, tuple[float, int]] = field(default_factory=dict)


def upgrade_opset(model: onnx.ModelProto) -> onnx.ModelProto:
    """A model older than opset 11 converted to opset 13 (the converter does it, not the user)."""
    current = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if current >= MIN_OPSET:
        return model
    try:
        converted = onnx.version_converter.convert_version(model, UPGRADE_OPSET)
    except Exception as exc:  # the version converter raises several types
        raise ConversionError(f"ONNX opset {current} is too old and could not be upgraded to "
                              f"{UPGRADE_OPSET}: {exc}") from None  # fmt: skip
    sys.stderr.write(f"I upgraded the model from ONNX opset {current} to {UPGRADE_OPSET}\n")
    return converted


def drop_io_value_info(model: onnx.ModelProto) -> None:
    """Remove value_info entries that repeat a graph input or output (some exporters write
    them; they would pin the type of an output that quantisation changes)."""
    io = {v.name for v in model.graph.input} | {v.name for v in model.graph.output}
    keep = [v for v in model.graph.value_info if v.name not in io]
    del model.graph.value_info[:]
    model.graph.value_info.extend(keep)


def prepare(model: onnx.ModelProto, config: Config, do_quantization: bool,
            rknn_batch_size: int | None, custom: Mapping[str, Any] | None = None,
            ) -> tuple[onnx.ModelProto, list | None, custom_ops.CutModel | None]:  # fmt: skip
    """The optimised float graph (batch and shape sets applied, registered custom nodes cut
    out: toolkit/custom_ops.py), the shape sets and the cut that puts the custom nodes back."""
    platform = config.target_platform
    target = targets.get(platform)
    if not do_quantization and not target.float_models:
        raise ConversionError(f"{platform} runs only quantised models: do_quantization=True")
    shape_sets = None
    if rknn_batch_size not in (None, 1):
        if not isinstance(rknn_batch_size, int) or rknn_batch_size < 1:
            raise ConversionError(f"rknn_batch_size must be a positive integer, "
                                  f"not {rknn_batch_size!r}")  # fmt: skip
        model = onnx_import.set_batch(model, rknn_batch_size)
    cut = custom_ops.cut(model, dict(custom or {}))
    if cut is not None:
        if config.dynamic_input:
            raise ConversionError("custom operators in a model with dynamic_input are not "
                                  "supported")  # fmt: skip
        model = cut.model
    if config.dynamic_input:
        if not target.dynamic_shapes:
            raise ConversionError(f"dynamic_input: {platform} has no dynamic shapes (only "
                                  f"{', '.join(sorted(targets.DYNAMIC_SHAPES))})")  # fmt: skip
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        shape_sets = onnx_import.apply_shape_sets(copy, config.dynamic_input)
        model = onnx_import.complete_outputs(copy)
    try:
        prepared = passes.run_all(model)
    except Exception as exc:  # onnx/onnxruntime errors from folding or checking
        raise ConversionError(f"graph optimisation failed: {engine_words(exc)}") from None
    onnx_import.check_ops(prepared)
    return prepared, shape_sets, cut


def input_configs(model: onnx.ModelProto, config: Config) -> dict[str, lower.InputConfig]:
    means, stds = config.mean_values, config.std_values
    configs = {}
    for k, vi in enumerate(model.graph.input):
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        mean = means[k] if means is not None and k < len(means) else None
        std = stds[k] if stds is not None and k < len(stds) else None
        for what, values in (("mean_values", mean), ("std_values", std)):
            if values is not None and (len(dims) != 4 or len(values) != dims[1]):
                raise ConversionError(
                    f"{what}[{k}] has {len(values)} values, but input '{vi.name}' {dims} "
                    "needs one per channel of a 4-D NCHW input"
                )
        configs[vi.name] = lower.InputConfig(mean, std)
    return configs


def input_specs(model: onnx.ModelProto) -> list[datasets.InputSpec]:
    return [datasets.InputSpec(vi.name, tuple(d.dim_value for d in vi.type.tensor_type.shape.dim))
            for vi in model.graph.input]  # fmt: skip


def calibration_samples(prepared: onnx.ModelProto, config: Config, dataset: Any,
                        limit: int | None = None, cut: custom_ops.CutModel | None = None,
                        ) -> datasets.Samples:  # fmt: skip
    """The dataset read for `prepared`'s inputs and normalised with mean/std; samples of
    batch 1 are repeated to fill a multi-batch model's batch. With custom nodes cut out, the
    dataset holds the original inputs and `compute` gives the cut model's extra ones. The
    samples are read as they are used (dataset.Samples): memory holds one at a time."""
    specs = input_specs(prepared)
    if cut is not None:
        specs = [s for s in specs if s.name in cut.original_inputs]
    if config.dynamic_input:  # symbolic dims: calibrate at the first shape set
        specs = [datasets.InputSpec(s.name, tuple(int(d) for d in shape))
                 for s, shape in zip(specs, config.dynamic_input[0])]  # fmt: skip
    single = [datasets.InputSpec(s.name, (1, *s.shape[1:]) if s.shape else s.shape)
              for s in specs]  # fmt: skip
    rgb2bgr = [config.rgb2bgr_for(k) for k in range(len(specs))]
    dataset = datasets.reiterable(dataset, limit)  # opened twice below at most
    try:
        raw = datasets.open_dataset(dataset, specs, rgb2bgr, limit=limit)
        raw[0]  # the first sample decides: the model's batch, or batch 1 repeated
    except ConversionError:
        if all(s.shape == t.shape for s, t in zip(specs, single)):
            raise
        raw = datasets.open_dataset(dataset, single, rgb2bgr, limit=limit)
        raw[0]

    def prepared_sample(sample: list[np.ndarray]) -> list[np.ndarray]:
        sample = datasets.normalise(sample, config.mean_values, config.std_values)
        return [np.repeat(x, s.shape[0] // x.shape[0], axis=0)
                if x.ndim and s.shape and x.shape[0] != s.shape[0] else x
                for x, s in zip(sample, specs)]  # fmt: skip

    out = raw.map(prepared_sample)
    return cut.extend_samples(out) if cut is not None else out


def compile_model(
    prepared: onnx.ModelProto, config: Config, name: str, *,
    samples: Sequence[list[np.ndarray]] | None, shape_sets: list | None = None,
    rknn_batch_size: int | None = None, float_layers: Collection[str] = (),
    overrides: Mapping[str, tuple[float, int]] | None = None,
    progress: Callable[[int, int], None] | None = None,
    cut: custom_ops.CutModel | None = None,
) -> Built:  # fmt: skip
    """Quantise (when `samples` are given) or round to float16, then lower to a model file."""
    configs = input_configs(prepared, config)
    program, io_qparams, stored_types = prepared, None, None
    float_dtype, tensor_qparams = config.float_dtype, {}
    try:
        if samples is not None:
            kwargs = {"progress": progress} if progress is not None else {}
            quantized = quantize.quantize_model(
                prepared, samples, algorithm=config.quantized_algorithm,
                per_channel=config.quantized_method == "channel",
                float_layers=tuple(float_layers), overrides=overrides,
                shape_sets=config.dynamic_input, **kwargs,
            )  # fmt: skip
            program, io_qparams = quantized.program, quantized.io_qparams
            tensor_qparams = dict(quantized.tensor_qparams)
            stored_types = frozenset({onnx.TensorProto.INT8, onnx.TensorProto.FLOAT16})
            float_dtype = "int8"
        elif float_dtype == "float16":
            program = quantize.emulate_fp16(prepared)
            stored_types = frozenset({onnx.TensorProto.FLOAT16})
    except ConversionError:
        raise
    except Exception as exc:  # numpy/onnx errors while rewriting the graph
        raise ConversionError(f"quantisation failed: {engine_words(exc)}") from None
    if cut is not None:  # the custom nodes back in place, around the converted program
        program = custom_ops.stitch(program, cut, io_qparams)
    # a pass may leave a value_info entry for a graph output with the float type it had before
    # conversion; onnxruntime rejects the graph then (the output's own entry carries the type)
    drop_io_value_info(program)
    kept = onnx.ModelProto()  # lowering moves the weights out of the graph it is given
    kept.CopyFrom(program)
    meta, graph, weights = lower.lower(
        program, configs, target_platform=config.target_platform, float_dtype=float_dtype,
        custom_string=config.custom_string, model_name=name,
        toolkit_version=f"rknnrt {TOOLKIT_VERSION}", remove_weight=config.remove_weight,
        shape_sets=shape_sets, io_qparams=io_qparams, stored_types=stored_types,
        rknn_batch_size=rknn_batch_size or 1,
    )  # fmt: skip
    return Built(container.write(meta.to_json(), graph, weights), prepared, kept,
                 float_dtype, tensor_qparams, dict(io_qparams or {}))
