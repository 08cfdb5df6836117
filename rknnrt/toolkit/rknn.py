"""`RKNN`: the converter's user-facing class, the rknn-toolkit2 2.5.0 surface signature for
signature.

Methods return 0 on success and -1 on failure with one `E <method>:` line on stderr;
`inference` returns a list of float32 arrays, `eval_perf` the table, `eval_memory` a dict,
`get_sdk_version` a string, or None on failure, as the vendor's do. `RKNN.last_error` keeps the
message for programs.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import onnx

from ..model import files
from . import accuracy, builder, codegen, custom_ops, hybrid, onnx_import
from . import config as configuration
from . import dataset as datasets
from .calls import replaces_model as _replaces_model
from .calls import reported as _reported
from .calls import value as _value
from .errors import ConversionError, engine_words
from .loaders import caffe, darknet, pytorch, tensorflow
from .simulation import RuntimeReported, Simulation

TOOLKIT_VERSION = builder.TOOLKIT_VERSION


class RKNN:
    """config() -> load_*() -> build() -> export_rknn() / init_runtime() -> inference()."""

    NPU_CORE_AUTO, NPU_CORE_0, NPU_CORE_1, NPU_CORE_2 = 0, 1, 2, 4
    NPU_CORE_0_1, NPU_CORE_0_1_2, NPU_CORE_ALL = 3, 7, 0xFFFF

    def __init__(self, verbose: bool = False, verbose_file: str | None = None) -> None:
        self.verbose = verbose
        self.last_error = ""
        self._config: configuration.Config = configuration.DEFAULTS
        self._configured = False
        self._onnx: onnx.ModelProto | None = None
        self._name = self._file_stem = ""
        self._built: builder.Built | None = None
        self._rknn: bytes | None = None  # a model file given to load_rknn
        self._sim: Simulation | None = None
        self._custom_ops: dict[str, type] = {}
        self._cut: custom_ops.CutModel | None = None  # the custom nodes build cut out

    def _info(self, message: str) -> None:
        if self.verbose:
            sys.stderr.write(f"I {message}\n")

    # -- configuration and loading ------------------------------------------------------------
    @_reported
    def config(
        self, mean_values=None, std_values=None, quantized_dtype="w8a8",
        quantized_algorithm="normal", quantized_method="channel", quantized_hybrid_level=0,
        target_platform=None, quant_img_RGB2BGR=False, float_dtype="float16",
        optimization_level=3, custom_string=None, remove_weight=False, compress_weight=False,
        inputs_yuv_fmt=None, single_core_mode=False, dynamic_input=None, model_pruning=False,
        op_target=None, quantize_weight=False, remove_reshape=False, sparse_infer=False,
        mini_rknn=False, enable_flash_attention=False, auto_hybrid_cos_thresh=0.98,
        auto_hybrid_euc_thresh=None, memory_plan_strategy="BestFit", compute_order="WidthFirst",
        compiler_control_file=None, **kwargs,
    ) -> None:  # fmt: skip
        given = {k: v for k, v in locals().items() if k not in ("self", "kwargs")}
        given.update(kwargs)
        new, no_effect = configuration.updated(self._config, given)
        self._config, self._configured = new, True
        if no_effect:
            sys.stderr.write(f"W config: recorded, no effect on a PC: {', '.join(no_effect)}\n")

    def _loaded(self, proto: onnx.ModelProto, name: str, inputs=None, input_size_list=None,
                outputs=None) -> None:  # fmt: skip
        proto = builder.upgrade_opset(proto)
        builder.drop_io_value_info(proto)
        dynamic = bool(self._config.dynamic_input) and input_size_list is None
        onnx_import.set_inputs(proto, inputs, input_size_list, allow_dynamic=dynamic)
        onnx_import.set_outputs(proto, outputs)
        self._onnx = proto if dynamic else onnx_import.complete_outputs(proto)
        self._name = self._onnx.graph.name or name
        self._file_stem = name  # hybrid step 1's files are named after the model file
        self._built, self._rknn = None, None

    @staticmethod
    def _stem(model: Any, default: str) -> str:
        if isinstance(model, (str, os.PathLike)):
            return os.path.splitext(os.path.basename(os.fspath(model)))[0]
        return default

    @_reported
    @_replaces_model
    def load_onnx(self, model, inputs=None, input_size_list=None, input_initial_val=None,
                  outputs=None) -> None:  # fmt: skip
        if input_initial_val is not None:
            sys.stderr.write("W load_onnx: input_initial_val is recorded, not applied\n")
        self._loaded(onnx_import.load(model), self._stem(model, "model"), inputs,
                     input_size_list, outputs)  # fmt: skip

    @_reported
    @_replaces_model
    def load_pytorch(self, model, input_size_list) -> None:
        self._loaded(pytorch.load(model, input_size_list), self._stem(model, "torch_model"))

    @_reported
    @_replaces_model
    def load_tflite(self, model, input_is_nchw=False) -> None:
        proto = tensorflow.load_tflite(model)
        if not input_is_nchw:
            proto = tensorflow.inputs_as_nchw(proto)
        self._loaded(proto, self._stem(model, "tflite_model"))

    @_reported
    @_replaces_model
    def load_tensorflow(self, tf_pb, inputs, input_size_list, outputs,
                        input_is_nchw=False) -> None:  # fmt: skip
        proto = tensorflow.load_tensorflow(tf_pb, inputs, input_size_list, outputs)
        if not input_is_nchw:
            proto = tensorflow.inputs_as_nchw(proto)
        self._loaded(proto, self._stem(tf_pb, "tf_model"))

    @_reported
    @_replaces_model
    def load_caffe(self, model, blobs=None, input_name=None) -> None:
        proto = caffe.load(model, blobs, self._config.dynamic_input)
        self._loaded(proto, self._stem(model, "caffe_model"))

    @_reported
    @_replaces_model
    def load_darknet(self, model, weight) -> None:
        self._loaded(darknet.load(model, weight), self._stem(model, "darknet_model"))

    @_reported
    @_replaces_model
    def load_rknn(self, path) -> None:
        try:
            self._rknn = files.read_bytes(path)
        except (OSError, TypeError) as exc:
            raise ConversionError(f"cannot read {path!r}: {exc}") from None
        self._onnx, self._built = None, None

    @_reported
    def reg_custom_op(self, custom_op) -> None:
        """Records the class (op_type, shape_infer, compute: toolkit/custom_ops.py); build keeps
        the model's nodes of that op type as custom operators."""
        op = custom_op() if isinstance(custom_op, type) else custom_op  # the docs pass a class
        self._custom_ops[custom_ops.check_op(op)] = op

    # -- building ------------------------------------------------------------------------------
    def _prepare(self, do_quantization: bool, rknn_batch_size: int | None) -> onnx.ModelProto:
        if self._onnx is None:
            raise ConversionError("no model loaded: call load_onnx (or another load_*) first")
        prepared, self._shape_sets, self._cut = builder.prepare(
            self._onnx, self._config, do_quantization, rknn_batch_size, self._custom_ops
        )
        return prepared

    @_reported
    @_replaces_model
    def build(self, do_quantization=True, dataset=None, rknn_batch_size=None,
              auto_hybrid=False) -> None:  # fmt: skip
        if do_quantization and dataset is None:
            raise ConversionError("do_quantization=True needs a calibration dataset "
                                  "(dataset='dataset.txt'), or build(do_quantization=False)")
        prepared = self._prepare(do_quantization, rknn_batch_size)
        samples = builder.calibration_samples(prepared, self._config, dataset, cut=self._cut) \
            if do_quantization else None  # fmt: skip
        float_layers: list[str] = []
        if do_quantization and auto_hybrid:
            float_layers = self._auto_hybrid_layers(prepared, samples)
        self._compile(prepared, samples, rknn_batch_size, float_layers)

    def _compile(self, prepared, samples, rknn_batch_size=None, float_layers=(),
                 overrides=None) -> None:  # fmt: skip
        self._release_runtime()
        self._built = builder.compile_model(
            prepared, self._config, self._name, samples=samples,
            shape_sets=getattr(self, "_shape_sets", None), rknn_batch_size=rknn_batch_size,
            float_layers=float_layers, overrides=overrides, cut=self._cut,
        )  # fmt: skip
        self._rknn = None
        self._info(f"build: {len(self._built.program.graph.node)} nodes, "
                   f"{len(self._built.model_bytes)} bytes")  # fmt: skip

    def _layer_errors(self, built: builder.Built, samples) -> dict[str, float]:
        """Worst single-layer cosine per node name over a few samples."""
        producer = {o: n.name for n in built.float_program.graph.node for o in n.output}
        worst: dict[str, float] = {}
        shown = samples[:4]
        for k, sample in enumerate(shown):
            sys.stderr.write(f"\rI hybrid analysis {k + 1}/{len(shown)}")
            errors, _, _ = accuracy.analyse(built.float_program, built.program, sample,
                                            built.tensor_qparams, built.io_qparams)  # fmt: skip
            for e in errors:
                if e.single is not None and e.name in producer:
                    node = producer[e.name]
                    worst[node] = min(worst.get(node, 1.0), e.single[0])
        sys.stderr.write("\n")
        return worst

    def _auto_hybrid_layers(self, prepared, samples) -> list[str]:
        """Layers whose single-layer cosine (or Euclidean distance) misses the thresholds."""
        trial = builder.compile_model(prepared, self._config, self._name, samples=samples,
                                      shape_sets=getattr(self, "_shape_sets", None))  # fmt: skip
        cos_thresh = self._config.auto_hybrid_cos_thresh
        errors = self._layer_errors(trial, samples)
        layers = [n for n, cos in errors.items() if cos < cos_thresh]
        sys.stderr.write(f"I auto_hybrid: {len(layers)} layer(s) below cosine {cos_thresh} "
                         f"kept in float16{': ' + ', '.join(layers) if layers else ''}\n")
        return layers

    @_reported
    def hybrid_quantization_step1(self, dataset="dataset.txt", rknn_batch_size=None,
                                  proposal=False, proposal_dataset_size=1,
                                  custom_hybrid=None) -> None:  # fmt: skip
        prepared = self._prepare(True, rknn_batch_size)
        if self._cut is not None:
            raise ConversionError("hybrid quantisation of a model with custom operators is not "
                                  "supported")  # fmt: skip
        samples = builder.calibration_samples(prepared, self._config, dataset)
        trial = builder.compile_model(prepared, self._config, self._name, samples=samples,
                                      shape_sets=getattr(self, "_shape_sets", None))  # fmt: skip
        layers: list[str] = []
        for pair in custom_hybrid or []:
            if len(pair) != 2:
                raise ConversionError("custom_hybrid entries are [start_tensor, end_tensor]")
            layers += [n for n in hybrid.layers_between(prepared, pair[0], pair[1])
                       if n not in layers]  # fmt: skip
        if proposal:
            errors = self._layer_errors(trial, samples[: max(1, int(proposal_dataset_size))])
            level = self._config.quantized_hybrid_level
            ranked = sorted(errors, key=errors.get)
            picks = [n for n in ranked if errors[n] < self._config.auto_hybrid_cos_thresh]
            picks += ranked[: level] if level else []
            layers += [n for n in picks if n not in layers]
        stem = self._file_stem if self._file_stem not in ("model", "") else self._name
        hybrid.write_model(f"{stem}.model", prepared, self._config.as_dict())
        hybrid.write_data(f"{stem}.data", samples)
        files.write_atomic(
            f"{stem}.quantization.cfg",
            hybrid.format_cfg(layers, hybrid.tensor_params(trial.tensor_qparams)),
        )
        sys.stderr.write(f"I hybrid step 1 wrote {stem}.model, {stem}.data and "
                         f"{stem}.quantization.cfg\n")  # fmt: skip

    @_reported
    def hybrid_quantization_step2(self, model_input, data_input,
                                  model_quantization_cfg) -> None:  # fmt: skip
        # the files replace whatever this object holds (the model zoo runs step 1 and step 2
        # on one object, as the vendor allows)
        prepared, stored = hybrid.read_model(os.fspath(model_input))
        if stored is not None and not self._configured:
            self._config = configuration.updated(configuration.DEFAULTS, stored)[0]
        samples = hybrid.read_data(os.fspath(data_input), len(prepared.graph.input))
        layers, overrides = hybrid.read_cfg(os.fspath(model_quantization_cfg))
        names = {n.name for n in prepared.graph.node}
        unknown = [name for name in layers if name not in names]
        if unknown:
            raise ConversionError(f"{model_quantization_cfg}: no layer named {unknown[0]!r} in "
                                  f"the model (layers: {', '.join(sorted(names)[:8])}, ...)")
        self._name, self._shape_sets, self._cut = self._stem(model_input, "model"), None, None
        self._compile(prepared, samples, None, layers, overrides)

    @_reported
    def export_rknn(self, export_path, **kwargs) -> None:
        data = self.model_bytes()
        try:
            files.write_atomic(export_path, data)  # a failed write keeps the previous file
        except (OSError, TypeError) as exc:
            raise ConversionError(f"cannot write {os.fspath(export_path)!r}: {exc}") from None

    def model_bytes(self) -> bytes:
        """The built (or loaded) model file's bytes (rknnrt extension)."""
        if self._built is not None:
            return self._built.model_bytes
        if self._rknn is not None:
            return self._rknn
        raise ConversionError("no model: call build (or load_rknn) first")

    @_reported
    def optimize_onnx(self, model, optimized_path=None, passes_enable=None,
                      inputs_for_dump=None) -> None:  # fmt: skip
        from . import passes

        try:
            optimized = passes.run_all(onnx_import.load(model))
        except ConversionError:
            raise
        except Exception as exc:  # onnx/onnxruntime errors
            raise ConversionError(f"graph optimisation failed: {engine_words(exc)}") from None
        files.write_atomic(
            optimized_path or f"{self._stem(model, 'model')}.optimized.onnx",
            optimized.SerializeToString(),
        )

    # -- running ------------------------------------------------------------------------------
    def _release_runtime(self) -> None:
        if self._sim is not None:
            self._sim.release()
            self._sim = None

    @_reported
    def init_runtime(self, target=None, device_id=None, perf_debug=False, eval_mem=False,
                     async_mode=False, core_mask=0,
                     fallback_prior_device="cpu") -> None:  # fmt: skip
        model = self.model_bytes()
        self._release_runtime()
        platform = self._config.target_platform if self._built is not None else None
        if platform is None:  # a loaded file: its own platform
            import json

            from ..model import container

            try:
                platform = json.loads(bytes(container.read(memoryview(model)).metadata))[
                    "target_platform"]
            except Exception:  # the runtime reports an unreadable file itself
                platform = None
        self._sim = Simulation(model, platform, target, perf_debug, async_mode, core_mask,
                               self._custom_ops)  # fmt: skip

    def _runtime(self) -> Simulation:
        if self._sim is None:
            raise ConversionError("the runtime is not initialised: call init_runtime first")
        return self._sim

    @_value
    def inference(self, inputs, data_format=None, inputs_pass_through=None,
                  get_frame_id=False) -> list[np.ndarray]:  # fmt: skip
        out = self._runtime().inference(inputs, data_format, inputs_pass_through)
        if out is None:
            raise RuntimeReported("inference failed")
        return out

    @_value
    def eval_perf(self, is_print=True, fix_freq=True) -> str:
        table, total = self._runtime().perf()
        report = f"{table.rstrip()}\nTotal time of one run: {total} us\n"
        if is_print:
            print(report)
        return report

    @_value
    def eval_memory(self, is_print=True) -> dict[str, int]:
        sizes = self._runtime().memory()
        result = {"total_weight_allocation": sizes["total_weight_size"],
                  "total_internal_allocation": sizes["total_internal_size"],
                  "total_model_allocation": sizes["total_weight_size"]
                  + sizes["total_internal_size"], **sizes}  # fmt: skip
        if is_print:
            for key in ("total_weight_allocation", "total_internal_allocation",
                        "total_model_allocation"):  # fmt: skip
                print(f"{key.replace('_', ' ').capitalize():<30} {result[key] / 2**20:.4f} MiB")
        return result

    @_value
    def get_sdk_version(self) -> str:
        return self._runtime().sdk_version()

    @_value
    def list_devices(self) -> tuple[list[str], list[str]]:
        sys.stderr.write("I no board is attached: rknnrt simulates every target on this PC\n")
        print("*" * 25 + "\nAll device(s) with adb mode:\n\n" + "*" * 25)
        return [], []

    @_reported
    def accuracy_analysis(self, inputs, output_dir="./snapshot", target=None,
                          device_id=None) -> None:  # fmt: skip
        built = self._built
        if built is None:
            raise ConversionError("accuracy_analysis needs the model built in this session "
                                  "(load_onnx + build), not one loaded with load_rknn")
        if target is not None:
            sys.stderr.write(f"I no {target} board is attached: comparing against the "
                             "simulation only\n")  # fmt: skip
        paths = [inputs] if isinstance(inputs, (str, np.ndarray, os.PathLike)) else list(inputs)
        specs = builder.input_specs(built.float_program)
        single = [datasets.InputSpec(s.name, (1, *s.shape[1:])) for s in specs]
        rgb2bgr = [self._config.rgb2bgr_for(k) for k in range(len(specs))]
        if len(paths) != len(specs):
            raise ConversionError(f"{len(paths)} inputs given for a model with {len(specs)}")
        try:  # files as a dataset line reads them (never a FIFO or a device: it would hang)
            sample = [datasets.read_file_sample([os.fspath(p)], [s], [rgb2bgr[k]],
                                                lambda m: None)[0]
                      if isinstance(p, (str, os.PathLike)) else
                      datasets.to_model_layout(np.asarray(p), s)
                      for k, (p, s) in enumerate(zip(paths, single))]  # fmt: skip
        except (OSError, ValueError) as exc:
            raise ConversionError(f"inputs: {exc}") from None
        sample = datasets.normalise(sample, self._config.mean_values,
                                    self._config.std_values)  # fmt: skip
        sample = [np.repeat(x, s.shape[0] // x.shape[0], 0) if x.shape[0] != s.shape[0] else x
                  for x, s in zip(sample, specs)]  # fmt: skip
        accuracy.run(built.float_program, built.program, sample, built.tensor_qparams,
                     built.io_qparams, os.fspath(output_dir or "./snapshot"))  # fmt: skip

    @_reported
    def codegen(self, output_path, inputs=None, overwrite=False) -> None:
        codegen.generate(self.model_bytes(), self._name or "model", os.fspath(output_path),
                         inputs, overwrite)  # fmt: skip

    def clear_op_cache(self) -> int:
        return 0

    def release(self) -> None:
        self._release_runtime()
        self._onnx, self._built, self._rknn = None, None, None
