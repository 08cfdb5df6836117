"""The runnable program: a converted graph as onnxruntime sessions over the context's weights.

Owns how a model executes on the host: the whole-graph program (`whole.py`), the NPU/CPU segmented
program of a model with custom or CPU operators (`segmented.py`, crossing tensors:
`segment_memory.py`), where each operator runs (`placement.py`), registered custom operators
(`custom_ops.py`), the exact execution-only rewrites and kernel choices (`fast_graph.py`,
`selection_convs.py`, `int8_depthwise.py`, `fp16_layout.py`, `input_casts.py`), and the integer
sums of an int8 program's unstored convs and matrix products (`int8_islands.py`);
`whole.execution_graph` applies them. The rest of the core holds a `Program` (`base.py`) and
never asks which kind it is.
"""
