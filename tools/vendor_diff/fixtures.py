"""The small models the recorded vendor fixtures cover (built with onnx.helper, seeded)."""

from __future__ import annotations

import os
import sys

_TESTS = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "quant")
sys.path.insert(0, os.path.abspath(_TESTS))

from shaped_models import ocr_det_like, op_zoo, yolov5s_like  # noqa: E402
from test_quantization import mlp_model, two_io_model  # noqa: E402

FIXTURES = {
    "yolov5s_like": yolov5s_like,  # Conv/SiLU, Concat, MaxPool (SPPF), Resize, Sigmoid head
    "ocr_det_like": ocr_det_like,  # Resize-heavy FPN, HardSwish, Add, Sigmoid
    "op_zoo": op_zoo,  # Split, Slice, linear Resize, MatMul, final Softmax
    "two_io": two_io_model,  # two inputs, residual Add, Concat, GlobalAveragePool, Gemm
    "mlp": mlp_model,  # MatMul, Gemm, final Softmax
}
