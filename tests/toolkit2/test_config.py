"""RKNN.config and the vendor signatures: every keyword, flat mean/std, no-effect options,
invalid values leave the previous configuration intact."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from rknnrt.lite import RKNNLite
from rknnrt.toolkit import RKNN

from .models import run_onnx, tiny_cnn

# Parameter names of rknn-toolkit2 2.5.0's RKNN methods, read with inspect.signature from the
# vendor's installed package (facts, recorded by hand).
VENDOR_SIGNATURES = {
    "config": "mean_values std_values quantized_dtype quantized_algorithm quantized_method "
              "quantized_hybrid_level target_platform quant_img_RGB2BGR float_dtype "
              "optimization_level custom_string remove_weight compress_weight inputs_yuv_fmt "
              "single_core_mode dynamic_input model_pruning op_target quantize_weight "
              "remove_reshape sparse_infer mini_rknn enable_flash_attention "
              "auto_hybrid_cos_thresh auto_hybrid_euc_thresh memory_plan_strategy "
              "compute_order compiler_control_file kwargs",
    "load_onnx": "model inputs input_size_list input_initial_val outputs",
    "load_pytorch": "model input_size_list",
    "load_tflite": "model input_is_nchw",
    "load_tensorflow": "tf_pb inputs input_size_list outputs input_is_nchw",
    "load_caffe": "model blobs input_name",
    "load_darknet": "model weight",
    "load_rknn": "path",
    "build": "do_quantization dataset rknn_batch_size auto_hybrid",
    "export_rknn": "export_path kwargs",
    "init_runtime": "target device_id perf_debug eval_mem async_mode core_mask "
                    "fallback_prior_device",
    "inference": "inputs data_format inputs_pass_through get_frame_id",
    "eval_perf": "is_print fix_freq",
    "eval_memory": "is_print",
    "accuracy_analysis": "inputs output_dir target device_id",
    "hybrid_quantization_step1": "dataset rknn_batch_size proposal proposal_dataset_size "
                                 "custom_hybrid",
    "hybrid_quantization_step2": "model_input data_input model_quantization_cfg",
    "get_sdk_version": "", "list_devices": "", "release": "", "clear_op_cache": "",
    "codegen": "output_path inputs overwrite",
    "reg_custom_op": "custom_op",
    "optimize_onnx": "model optimized_path passes_enable inputs_for_dump",
}  # fmt: skip
VENDOR_DEFAULTS = {
    ("build", "do_quantization"): True, ("config", "auto_hybrid_cos_thresh"): 0.98,
    ("init_runtime", "fallback_prior_device"): "cpu", ("accuracy_analysis", "output_dir"):
    "./snapshot", ("config", "quantized_algorithm"): "normal", ("init_runtime", "core_mask"): 0,
}  # fmt: skip


@pytest.mark.parametrize("method", sorted(VENDOR_SIGNATURES))
def test_signature_matches_vendor(method: str) -> None:
    params = list(inspect.signature(getattr(RKNN, method)).parameters)[1:]
    assert params == VENDOR_SIGNATURES[method].split()
    for (m, name), value in VENDOR_DEFAULTS.items():
        if m == method:
            assert inspect.signature(getattr(RKNN, method)).parameters[name].default == value


def test_lite_signatures() -> None:
    sig = inspect.signature(RKNNLite.inference)
    assert list(sig.parameters)[1:] == ["inputs", "data_format", "inputs_pass_through",
                                        "get_frame_id"]  # fmt: skip
    sig = inspect.signature(RKNNLite.init_runtime)
    assert list(sig.parameters)[1:5] == ["target", "device_id", "async_mode", "core_mask"]


def _float_build(rknn: RKNN, model=None) -> np.ndarray:
    assert rknn.load_onnx(model or tiny_cnn()) == 0
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    assert rknn.init_runtime() == 0
    image = np.random.RandomState(3).randint(0, 256, (1, 16, 16, 3), np.uint8)
    (out,) = rknn.inference([image])
    return out


def test_flat_and_nested_mean_std_are_the_same() -> None:
    outs = []
    for mean, std in (([10.0, 20.0, 30.0], [2.0, 4.0, 8.0]),
                      ([[10.0, 20.0, 30.0]], [[2.0, 4.0, 8.0]])):  # fmt: skip
        rknn = RKNN()
        assert rknn.config(mean_values=mean, std_values=std, float_dtype="float32") == 0
        outs.append(_float_build(rknn))
    np.testing.assert_array_equal(outs[0], outs[1])
    image = np.random.RandomState(3).randint(0, 256, (1, 16, 16, 3), np.uint8)
    x = (image.transpose(0, 3, 1, 2) - np.array([10, 20, 30]).reshape(1, 3, 1, 1)) \
        / np.array([2, 4, 8]).reshape(1, 3, 1, 1)  # fmt: skip
    np.testing.assert_allclose(outs[0], run_onnx(tiny_cnn(), {"images": x})[0], rtol=1e-4,
                               atol=1e-4)  # fmt: skip


def test_no_effect_options_are_recorded_with_one_warning(capsys) -> None:
    rknn = RKNN()
    ret = rknn.config(mean_values=[1, 2, 3], target_platform="rk3566", quant_img_RGB2BGR=True,
                      optimization_level=2, op_target={"conv1": "cpu"}, model_pruning=True,
                      compress_weight=True, single_core_mode=True, quantize_weight=True,
                      inputs_yuv_fmt=["nv12"], some_future_option=1)  # fmt: skip
    assert ret == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("W ")]
    assert len(warnings) == 1
    for name in ("optimization_level", "op_target", "model_pruning", "compress_weight",
                 "single_core_mode", "quantize_weight", "inputs_yuv_fmt", "some_future_option"):
        assert name in warnings[0]
    # the other settings of that call took effect
    assert rknn.load_onnx(tiny_cnn()) == 0
    assert rknn.build(do_quantization=False) == 0
    assert rknn.init_runtime() == 0
    assert "rk3566" not in rknn.last_error
    assert rknn.init_runtime(target="rk3588") == -1  # built for rk3566
    assert "built for rk3566" in rknn.last_error


@pytest.mark.parametrize(("bad", "message"), [
    ({"target_platform": "rk9999"}, "target_platform 'rk9999'"),
    ({"quantized_algorithm": "best"}, "quantized_algorithm 'best'"),
    ({"quantized_method": "tensor"}, "quantized_method 'tensor'"),
    ({"mean_values": ["a", "b", "c"]}, "every value must be a number"),
    ({"std_values": [1, 0, 1]}, "std_values contains 0"),
    ({"quantized_hybrid_level": -1}, "quantized_hybrid_level"),
    ({"auto_hybrid_cos_thresh": "high"}, "auto_hybrid_cos_thresh"),
    ({"quant_img_RGB2BGR": "yes"}, "quant_img_RGB2BGR"),
])  # fmt: skip
def test_invalid_value_keeps_previous_config(bad: dict, message: str, capsys) -> None:
    rknn = RKNN()
    assert rknn.config(mean_values=[10, 20, 30], std_values=[2, 4, 8], float_dtype="float32",
                       target_platform="rk3588") == 0  # fmt: skip
    assert rknn.config(**{"target_platform": "rk3566", "float_dtype": "float16", **bad}) == -1
    assert message in rknn.last_error
    assert capsys.readouterr().err.count("E config:") == 1
    # still rk3588, float32 and the first mean/std: outputs equal a fresh build with them
    out = _float_build(rknn)
    reference = RKNN()
    reference.config(mean_values=[10, 20, 30], std_values=[2, 4, 8], float_dtype="float32")
    np.testing.assert_array_equal(out, _float_build(reference))
    assert rknn.init_runtime(target="rk3588") == 0


def test_build_defaults_to_quantisation_like_the_vendor() -> None:
    rknn = RKNN()
    assert rknn.load_onnx(tiny_cnn()) == 0
    assert rknn.build() == -1
    assert "needs a calibration dataset" in rknn.last_error
    data = [np.random.RandomState(k).rand(1, 3, 16, 16).astype(np.float32) for k in range(2)]
    assert rknn.build(dataset=data) == 0
    assert rknn.init_runtime() == 0
    import ctypes

    import rknnrt as rk

    ctx = rk.rknn_context(0)
    blob = rknn.model_bytes()
    assert rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None) == 0
    attr = rk.rknn_tensor_attr(index=0)
    rk.rknn_query(ctx, rk.RKNN_QUERY_INPUT_ATTR, ctypes.byref(attr), ctypes.sizeof(attr))
    assert attr.type == rk.RKNN_TENSOR_INT8
    rk.rknn_destroy(ctx)
