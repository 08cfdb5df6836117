"""Open an onnxruntime session under a named policy (policies.py): the package's one door."""

from __future__ import annotations

from typing import Any

from . import int8_kernels, kernels, shared_weights
from .policies import Policy, open_session, session_options

# Operators through which onnxruntime reaches its u8s8 kernels (its QDQ fusion included).
INTEGER_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul",
                         "ConvInteger", "MatMulInteger", "QGemm", "QAttention",
                         "DynamicQuantizeLinear", "QLinearAdd", "QLinearMul"})  # fmt: skip


def uses_integer_kernels(model: Any) -> bool:
    """Whether a graph (bytes or ModelProto) has an operator that may run on int8 kernels."""
    import onnx

    if isinstance(model, str):
        proto = onnx.load(model, load_external_data=False)
    elif isinstance(model, onnx.ModelProto):
        proto = model
    else:
        proto = onnx.load_model_from_string(model)
    return any(node.op_type in INTEGER_OPS for node in proto.graph.node)


def create(model: Any, policy: Policy, **settings: Any) -> Any:
    """A session of `model` (bytes, a path or a ModelProto) under `policy`; `settings` as for
    `options_for`. Where the exact int8 kernels apply, a weight's quantised constant shared by
    several consumers is first copied per consumer (shared_weights.py: onnxruntime refuses it)."""
    import onnx

    proto = model if isinstance(model, onnx.ModelProto) else None
    if policy.exact_int8 and isinstance(model, (bytes, bytearray, memoryview)):
        proto = onnx.load_model_from_string(bytes(model))
    given = settings.get("initializers")
    if (proto is not None and _exact(proto, policy)
            and shared_weights.is_shared(proto, given[0] if given else [])):  # fmt: skip
        untied = onnx.ModelProto()
        untied.CopyFrom(proto)
        given = shared_weights.untie(untied, given)
        proto, model = untied, untied
        if given is not None:
            settings = {**settings, "initializers": given}
    options = options_for(proto if proto is not None else model, policy, **settings)
    if isinstance(model, onnx.ModelProto):
        model = model.SerializeToString()
    return open_session(model, options)


def _uses_kernels(model: Any) -> bool:
    """Whether a graph (bytes or a ModelProto; a path is never read again for this) has a node
    of rknnrt's compiled kernels (sessions/kernels): only such a graph gets their library
    registered."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        return kernels.uses_kernels(model)
    if isinstance(model, str):  # such graphs are made in memory (whole.execution_graph)
        return False
    if kernels.DOMAIN.encode() not in bytes(model):  # the domain's name is in any such graph
        return False
    return kernels.uses_kernels(onnx.load_model_from_string(bytes(model)))


def _exact(model: Any, policy: Policy) -> bool:
    """Whether `policy` gives `model` the exact int8 kernels (the probe runs only for a graph
    with an integer operator)."""
    return (policy.exact_int8 and uses_integer_kernels(model)
            and not int8_kernels.fast_kernels_exact())  # fmt: skip


def register_kernels(options: Any, model: Any) -> None:
    """Registers rknnrt's compiled kernel library in `options` where `model` (bytes or
    ModelProto) has nodes of its domain; a tool building its own session calls this too."""
    if _uses_kernels(model):
        library = kernels.loaded()
        if library is None:  # only a graph rewritten in this process carries the domain
            raise RuntimeError(f"the graph has {kernels.DOMAIN} nodes but no kernel library is "
                               "loaded in this process")  # fmt: skip
        options.register_custom_ops_library(str(library))


def options_for(
    model: Any,
    policy: Policy,
    *,
    threads: int | None = None,
    initializers: tuple[list[str], list] | None = None,
    profile_prefix: str | None = None,
    optimise: bool | None = None,
    optimized_model_path: str | None = None,
    config: dict[str, str] | None = None,
    files_in_memory: tuple[list[str], list, list] | None = None,
) -> Any:
    """The SessionOptions `policy` gives `model`: exact int8 kernels only where the graph has an
    integer operator and this CPU's fast kernels saturate (the probe runs only then).

    `threads`: the count for a policy that takes the caller's; `initializers`: (names, OrtValues)
    the session reads in place of the graph's external data; `profile_prefix`: profiling on, files
    there; `optimise`: overrides the policy's optimisation (a graph already laid out for this CPU
    runs unoptimised, one being laid out runs fully optimised); `optimized_model_path`: where
    onnxruntime writes the optimised graph; `config`: further session configuration entries;
    `files_in_memory`: (names, buffers, sizes) of the graph's external-data files, in memory."""
    import onnxruntime as ort

    options = session_options(policy, threads, _exact(model, policy))
    if optimise is not None:
        options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimise
                                            else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    if optimized_model_path is not None:
        options.optimized_model_filepath = optimized_model_path
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, value)
    register_kernels(options, model)
    if initializers is not None and initializers[0]:
        options.add_external_initializers(*initializers)
    if files_in_memory is not None and files_in_memory[0]:
        options.add_external_initializers_from_files_in_memory(*files_in_memory)
    return options
