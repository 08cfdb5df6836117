"""`RKNN`: the converter's user-facing class, shaped like the vendor's rknn-toolkit2 `RKNN`.

Each method returns 0 on success and -1 on failure with one `E <method>:` line on stderr, as
the vendor's toolkit does; `RKNN.last_error` keeps the message for programs.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import onnx

from ..model import container, targets
from . import lower, onnx_import, passes, quantize
from .errors import ConversionError

TOOLKIT_VERSION = "0.1.0"
FLOAT_DTYPES = ("float16", "float32")  # float32: rknnrt's exact extension
QUANTIZED_DTYPES = ("w8a8",)
ALGORITHMS = ("normal", "mmse")
METHODS = ("channel", "layer")


def _reported(method: Callable[..., None]) -> Callable[..., int]:
    @functools.wraps(method)
    def wrapper(self: RKNN, *args: Any, **kwargs: Any) -> int:
        try:
            method(self, *args, **kwargs)
        except ConversionError as exc:
            self.last_error = str(exc)
            sys.stderr.write(f"E {method.__name__}: {exc}\n")
            return -1
        except Exception as exc:  # a converter bug: still the vendor's -1, and say so
            self.last_error = f"internal error: {type(exc).__name__}: {exc}"
            sys.stderr.write(f"E {method.__name__}: {self.last_error}\n")
            return -1
        self.last_error = ""
        return 0

    return wrapper


class RKNN:
    """Convert an ONNX model: config() -> load_onnx() -> build() -> export_rknn()."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose
        self.last_error = ""
        self._config: dict[str, Any] = {
            "mean_values": None, "std_values": None, "target_platform": "rk3588",
            "float_dtype": "float16", "custom_string": "", "remove_weight": False,
            "dynamic_input": None, "quantized_dtype": "w8a8", "quantized_algorithm": "normal",
            "quantized_method": "channel",
        }  # fmt: skip
        self._onnx: onnx.ModelProto | None = None
        self._name = ""
        self._built: bytes | None = None

    def _info(self, message: str) -> None:
        if self.verbose:
            sys.stderr.write(f"I {message}\n")

    @_reported
    def config(
        self,
        mean_values: list[list[float]] | None = None,
        std_values: list[list[float]] | None = None,
        target_platform: str | None = None,
        float_dtype: str = "float16",
        custom_string: str | None = None,
        remove_weight: bool = False,
        dynamic_input: list[list[list[int]]] | None = None,
        quantized_dtype: str = "w8a8",
        quantized_algorithm: str = "normal",
        quantized_method: str = "channel",
        **unsupported: Any,
    ) -> None:
        for what, value, allowed in (
            ("quantized_dtype", quantized_dtype, QUANTIZED_DTYPES),
            ("quantized_algorithm", quantized_algorithm, ALGORITHMS),
            ("quantized_method", quantized_method, METHODS),
        ):
            if value not in allowed:
                raise ConversionError(f"{what} '{value}' is not supported; use one of {allowed}")
        if unsupported:
            raise ConversionError(f"config options not supported yet: {sorted(unsupported)}")
        if target_platform is not None:
            name = targets.canonical(target_platform)
            if name is None:
                raise ConversionError(
                    f"target_platform '{target_platform}' is not one of {', '.join(targets.NAMES)}"
                )
            self._config["target_platform"] = name
        if float_dtype not in FLOAT_DTYPES:
            raise ConversionError(
                f"float_dtype '{float_dtype}' is not supported yet; use one of {FLOAT_DTYPES}"
            )
        if custom_string is not None and len(custom_string.encode()) > 1023:
            raise ConversionError("custom_string must be at most 1023 bytes")
        self._config.update(
            mean_values=mean_values, std_values=std_values, float_dtype=float_dtype,
            custom_string=custom_string or "", remove_weight=bool(remove_weight),
            dynamic_input=dynamic_input or None, quantized_dtype=quantized_dtype,
            quantized_algorithm=quantized_algorithm, quantized_method=quantized_method,
        )  # fmt: skip

    @_reported
    def load_onnx(
        self,
        model: str | os.PathLike | bytes | onnx.ModelProto,
        inputs: list[str] | None = None,
        input_size_list: list[list[int]] | None = None,
        outputs: list[str] | None = None,
    ) -> None:
        proto = onnx_import.load(model)
        dynamic = bool(self._config["dynamic_input"]) and input_size_list is None
        onnx_import.set_inputs(proto, inputs, input_size_list, allow_dynamic=dynamic)
        onnx_import.set_outputs(proto, outputs)
        self._onnx = proto if dynamic else onnx_import.complete_outputs(proto)
        self._name = self._onnx.graph.name or (
            os.path.splitext(os.path.basename(os.fspath(model)))[0]
            if isinstance(model, (str, os.PathLike)) else "model"
        )  # fmt: skip
        self._built = None

    def _input_configs(self, model: onnx.ModelProto) -> dict[str, lower.InputConfig]:
        means, stds = self._config["mean_values"], self._config["std_values"]
        configs = {}
        for k, vi in enumerate(model.graph.input):
            dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            mean = means[k] if means is not None and k < len(means) else None
            std = stds[k] if stds is not None and k < len(stds) else None
            for what, values in (("mean_values", mean), ("std_values", std)):
                if values is None:
                    continue
                if len(dims) != 4 or len(values) != dims[1]:
                    raise ConversionError(
                        f"{what}[{k}] has {len(values)} values, but input '{vi.name}' "
                        f"{dims} needs one per channel of a 4-D NCHW input"
                    )
                if what == "std_values" and any(v == 0 for v in values):
                    raise ConversionError(f"std_values[{k}] contains 0")
            configs[vi.name] = lower.InputConfig(
                [float(v) for v in mean] if mean is not None else None,
                [float(v) for v in std] if std is not None else None,
            )
        return configs

    @_reported
    def build(
        self, do_quantization: bool = False, dataset: str | Iterable | None = None,
        rknn_batch_size: int | None = None,
    ) -> None:  # fmt: skip
        if self._onnx is None:
            raise ConversionError("no model loaded: call load_onnx first")
        platform = self._config["target_platform"]
        if not do_quantization and platform in targets.INT8_ONLY:
            raise ConversionError(f"{platform} runs only quantised models: do_quantization=True")
        if do_quantization and dataset is None:
            raise ConversionError("do_quantization=True needs a calibration dataset")
        model, shape_sets = self._onnx, None
        if rknn_batch_size not in (None, 1):
            model = onnx_import.set_batch(self._onnx, rknn_batch_size)
        if self._config["dynamic_input"]:
            if platform not in targets.DYNAMIC_SHAPES:
                raise ConversionError(
                    f"dynamic_input: {platform} has no dynamic shapes (only "
                    f"{', '.join(sorted(targets.DYNAMIC_SHAPES))})"
                )
            model = onnx.ModelProto()
            model.CopyFrom(self._onnx)
            shape_sets = onnx_import.apply_shape_sets(model, self._config["dynamic_input"])
            model = onnx_import.complete_outputs(model)
        try:
            prepared = passes.run_all(model)
        except Exception as exc:  # onnx/onnxruntime errors from folding or checking
            raise ConversionError(f"graph optimisation failed: {exc}") from None
        onnx_import.check_ops(prepared)
        configs = self._input_configs(prepared)
        program, io_qparams, stored_types = prepared, None, None
        float_dtype = self._config["float_dtype"]
        try:
            if do_quantization:
                program, io_qparams = self._quantize(prepared, configs, dataset)
                stored_types = frozenset({onnx.TensorProto.INT8, onnx.TensorProto.FLOAT16})
                float_dtype = "int8"
            elif float_dtype == "float16":
                program = quantize.emulate_fp16(prepared)
                stored_types = frozenset({onnx.TensorProto.FLOAT16})
        except ConversionError:
            raise
        except Exception as exc:  # numpy/onnx errors while rewriting the graph
            raise ConversionError(f"quantisation failed: {exc}") from None
        meta, graph, weights = lower.lower(
            program,
            configs,
            target_platform=platform,
            float_dtype=float_dtype,
            custom_string=self._config["custom_string"],
            model_name=self._name,
            toolkit_version=f"rknnrt {TOOLKIT_VERSION}",
            remove_weight=self._config["remove_weight"],
            shape_sets=shape_sets,
            io_qparams=io_qparams,
            stored_types=stored_types,
            rknn_batch_size=rknn_batch_size or 1,
        )
        self._built = container.write(meta.to_json(), graph, weights)
        self._info(f"build: {len(program.graph.node)} nodes, {len(weights)} bytes of weights")

    def _quantize(
        self, model: onnx.ModelProto, configs: dict[str, lower.InputConfig], dataset: Any
    ) -> tuple[onnx.ModelProto, dict[str, tuple[float, int]]]:
        """Calibrate on the dataset (normalised with mean/std, as the runtime will) and
        rewrite the model as a w8a8 QDQ program."""
        inputs = list(model.graph.input)
        samples = quantize.load_dataset(dataset, inputs)
        for sample in samples:
            for k, vi in enumerate(inputs):
                config = configs.get(vi.name)
                x = sample[k].astype(np.float32)
                if config is not None and x.ndim == 4:
                    if config.mean is not None:
                        x = x - np.asarray(config.mean, np.float32).reshape(1, -1, 1, 1)
                    if config.std is not None:
                        x = x / np.asarray(config.std, np.float32).reshape(1, -1, 1, 1)
                sample[k] = x
        quantized = quantize.quantize_model(
            model,
            samples,
            algorithm=self._config["quantized_algorithm"],
            per_channel=self._config["quantized_method"] == "channel",
        )
        return quantized.program, quantized.io_qparams

    @_reported
    def export_rknn(self, export_path: str | os.PathLike) -> None:
        if self._built is None:
            raise ConversionError("nothing to export: call build first")
        try:
            with open(export_path, "wb") as f:
                f.write(self._built)
        except OSError as exc:
            raise ConversionError(f"cannot write {os.fspath(export_path)!r}: {exc}") from None

    def model_bytes(self) -> bytes:
        """The built model file's bytes (rknnrt extension: no file round trip needed)."""
        if self._built is None:
            raise ConversionError("nothing built: call build first")
        return self._built

    def release(self) -> None:
        self._onnx = None
        self._built = None
