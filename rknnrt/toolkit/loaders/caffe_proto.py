"""The part of caffe.proto that `load_caffe` reads, built as protobuf descriptors at import.

Message names, field names, numbers, types and defaults are caffe.proto's (BVLC, plus SSD's
Permute = 202 and Normalize = 206 on LayerParameter); fields rknnrt does not use are left out,
and both the binary parser (unknown fields are skipped) and the text parser (called with
`allow_unknown_field`) pass over them. Old-format (V1) layers are read only for their name and
blobs, so an old `.caffemodel` can go with an upgraded prototxt.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {"string": _F.TYPE_STRING, "int32": _F.TYPE_INT32, "uint32": _F.TYPE_UINT32,
            "int64": _F.TYPE_INT64, "float": _F.TYPE_FLOAT, "double": _F.TYPE_DOUBLE,
            "bool": _F.TYPE_BOOL}  # fmt: skip

# enum -> (the message it is declared in, as caffe.proto nests it; its values)
ENUMS = {
    "Phase": (None, [("TRAIN", 0), ("TEST", 1)]),
    "PoolMethod": ("PoolingParameter", [("MAX", 0), ("AVE", 1), ("STOCHASTIC", 2)]),
    "RoundMode": ("PoolingParameter", [("CEIL", 0), ("FLOOR", 1)]),
    "EltwiseOp": ("EltwiseParameter", [("PROD", 0), ("SUM", 1), ("MAX", 2)]),
}

# message -> (name, number, type, repeated, default); a type not in _SCALARS/ENUMS is a message
_R, _O = True, False
MESSAGES: dict[str, list[tuple[str, int, str, bool, str | None]]] = {
    "BlobShape": [("dim", 1, "int64", _R, None)],
    "BlobProto": [("shape", 7, "BlobShape", _O, None), ("data", 5, "float", _R, None),
                  ("double_data", 8, "double", _R, None), ("num", 1, "int32", _O, "0"),
                  ("channels", 2, "int32", _O, "0"), ("height", 3, "int32", _O, "0"),
                  ("width", 4, "int32", _O, "0")],
    "NetStateRule": [("phase", 1, "Phase", _O, None)],
    "NetParameter": [("name", 1, "string", _O, None), ("input", 3, "string", _R, None),
                     ("input_shape", 8, "BlobShape", _R, None),
                     ("input_dim", 4, "int32", _R, None),
                     ("layer", 100, "LayerParameter", _R, None),
                     ("layers", 2, "V1LayerParameter", _R, None)],
    "V1LayerParameter": [("bottom", 2, "string", _R, None), ("top", 3, "string", _R, None),
                         ("name", 4, "string", _O, None), ("blobs", 6, "BlobProto", _R, None)],
    "LayerParameter": [
        ("name", 1, "string", _O, None), ("type", 2, "string", _O, None),
        ("bottom", 3, "string", _R, None), ("top", 4, "string", _R, None),
        ("phase", 10, "Phase", _O, None), ("blobs", 7, "BlobProto", _R, None),
        ("include", 8, "NetStateRule", _R, None), ("exclude", 9, "NetStateRule", _R, None),
        ("batch_norm_param", 139, "BatchNormParameter", _O, None),
        ("concat_param", 104, "ConcatParameter", _O, None),
        ("convolution_param", 106, "ConvolutionParameter", _O, None),
        ("dropout_param", 108, "DropoutParameter", _O, None),
        ("eltwise_param", 110, "EltwiseParameter", _O, None),
        ("flatten_param", 135, "FlattenParameter", _O, None),
        ("inner_product_param", 117, "InnerProductParameter", _O, None),
        ("input_param", 143, "InputParameter", _O, None),
        ("pooling_param", 121, "PoolingParameter", _O, None),
        ("prelu_param", 131, "PReLUParameter", _O, None),
        ("relu_param", 123, "ReLUParameter", _O, None),
        ("reshape_param", 133, "ReshapeParameter", _O, None),
        ("scale_param", 142, "ScaleParameter", _O, None),
        ("softmax_param", 125, "SoftmaxParameter", _O, None),
        ("permute_param", 202, "PermuteParameter", _O, None),
        ("norm_param", 206, "NormalizeParameter", _O, None),
    ],
    "ConvolutionParameter": [
        ("num_output", 1, "uint32", _O, None), ("bias_term", 2, "bool", _O, "true"),
        ("pad", 3, "uint32", _R, None), ("kernel_size", 4, "uint32", _R, None),
        ("stride", 6, "uint32", _R, None), ("dilation", 18, "uint32", _R, None),
        ("pad_h", 9, "uint32", _O, "0"), ("pad_w", 10, "uint32", _O, "0"),
        ("kernel_h", 11, "uint32", _O, None), ("kernel_w", 12, "uint32", _O, None),
        ("stride_h", 13, "uint32", _O, None), ("stride_w", 14, "uint32", _O, None),
        ("group", 5, "uint32", _O, "1"), ("axis", 16, "int32", _O, "1"),
    ],
    "PoolingParameter": [
        ("pool", 1, "PoolMethod", _O, "MAX"), ("pad", 4, "uint32", _O, "0"),
        ("pad_h", 9, "uint32", _O, "0"), ("pad_w", 10, "uint32", _O, "0"),
        ("kernel_size", 2, "uint32", _O, None), ("kernel_h", 5, "uint32", _O, None),
        ("kernel_w", 6, "uint32", _O, None), ("stride", 3, "uint32", _O, "1"),
        ("stride_h", 7, "uint32", _O, None), ("stride_w", 8, "uint32", _O, None),
        ("global_pooling", 12, "bool", _O, "false"), ("round_mode", 13, "RoundMode", _O, "CEIL"),
    ],
    "InnerProductParameter": [("num_output", 1, "uint32", _O, None),
                              ("bias_term", 2, "bool", _O, "true"),
                              ("axis", 5, "int32", _O, "1"), ("transpose", 6, "bool", _O, "false")],
    "ReLUParameter": [("negative_slope", 1, "float", _O, "0")],
    "PReLUParameter": [("channel_shared", 2, "bool", _O, "false")],
    "BatchNormParameter": [("use_global_stats", 1, "bool", _O, None),
                           ("moving_average_fraction", 2, "float", _O, "0.999"),
                           ("eps", 3, "float", _O, "1e-05")],
    "ScaleParameter": [("axis", 1, "int32", _O, "1"), ("num_axes", 2, "int32", _O, "1"),
                       ("bias_term", 4, "bool", _O, "false")],
    "EltwiseParameter": [("operation", 1, "EltwiseOp", _O, "SUM"),
                         ("coeff", 2, "float", _R, None)],
    "ConcatParameter": [("concat_dim", 1, "uint32", _O, "1"), ("axis", 2, "int32", _O, "1")],
    "SoftmaxParameter": [("axis", 2, "int32", _O, "1")],
    "DropoutParameter": [("dropout_ratio", 1, "float", _O, "0.5")],
    "FlattenParameter": [("axis", 1, "int32", _O, "1"), ("end_axis", 2, "int32", _O, "-1")],
    "ReshapeParameter": [("shape", 1, "BlobShape", _O, None), ("axis", 2, "int32", _O, "0"),
                         ("num_axes", 3, "int32", _O, "-1")],
    "InputParameter": [("shape", 1, "BlobShape", _R, None)],
    "PermuteParameter": [("order", 1, "uint32", _R, None)],
    "NormalizeParameter": [("across_spatial", 1, "bool", _O, "true"),
                           ("channel_shared", 3, "bool", _O, "true"),
                           ("eps", 4, "float", _O, "1e-10")],
}  # fmt: skip

PACKED = {("BlobShape", "dim"), ("BlobProto", "data"), ("BlobProto", "double_data")}


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name="rknnrt_caffe.proto", package="caffe",
                                               syntax="proto2")  # fmt: skip
    messages = {name: proto.message_type.add(name=name) for name in MESSAGES}
    for name, (owner, values) in ENUMS.items():
        enum = (messages[owner] if owner else proto).enum_type.add(name=name)
        for value_name, number in values:
            enum.value.add(name=value_name, number=number)
    for message, fields in MESSAGES.items():
        msg = messages[message]
        for name, number, kind, repeated, default in fields:
            field = msg.field.add(name=name, number=number)
            field.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
            if kind in _SCALARS:
                field.type = _SCALARS[kind]
            else:
                owner = ENUMS[kind][0] if kind in ENUMS else None
                field.type = _F.TYPE_ENUM if kind in ENUMS else _F.TYPE_MESSAGE
                field.type_name = f".caffe.{owner}.{kind}" if owner else f".caffe.{kind}"
            if default is not None:
                field.default_value = default
            if (message, name) in PACKED:
                field.options.packed = True
    return proto


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def message(name: str) -> Any:
    """A new, empty message of caffe.proto's type `name` (e.g. 'NetParameter')."""
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"caffe.{name}"))()


def pool() -> descriptor_pool.DescriptorPool:
    return _POOL
