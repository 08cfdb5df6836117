"""The ONNX operators the converter accepts (default domain), in the spirit of the vendor's
supported-operator list. Anything else is refused at build time with the op type and node name,
rather than failing later on a board."""

from __future__ import annotations

SUPPORTED_OPS = frozenset(
    {
        # convolution, pooling, normalisation
        "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
        "LpPool", "LRN", "BatchNormalization", "InstanceNormalization", "LayerNormalization",
        "GroupNormalization", "MaxRoiPool", "RoiAlign",
        # matrix
        "Gemm", "MatMul", "Einsum",
        # activations
        "Relu", "LeakyRelu", "PRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Clip",
        "Elu", "Selu", "Celu", "Softplus", "Softsign", "Mish", "Gelu", "Erf", "ThresholdedRelu",
        "Softmax", "LogSoftmax",
        # elementwise
        "Add", "Sub", "Mul", "Div", "Pow", "Sum", "Mean", "Max", "Min", "Abs", "Neg", "Sqrt",
        "Reciprocal", "Exp", "Log", "Floor", "Ceil", "Round", "Sin", "Cos", "Sign", "Mod",
        "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Not", "And", "Or", "Xor",
        "Where", "Cast",
        # reductions
        "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceL2",
        "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "TopK",
        # shape and data movement
        "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice",
        "Gather", "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Pad", "Tile",
        "Expand", "Resize", "Upsample", "DepthToSpace", "SpaceToDepth", "Shape", "Size",
        "Range", "ConstantOfShape", "Identity", "Dropout", "CumSum", "NonZero",
        # recurrent
        "LSTM", "GRU", "RNN",
    }
)  # fmt: skip
