"""Tensors at the API boundary: memory, layouts, attributes and the conversions between them.

Owns the caller's buffers and `rknn_tensor_mem` windows with their cache-coherency model
(`memory.py`; SRAM: `sram.py`), every stride/size rule and layout transform (`layouts.py`), the
attributes a query reports (`attrs.py`), input conversion (`plans.py`: InputPlan, OutputPlan) and
the output pipeline dequantise -> layout -> cast (`conversions.py`).
"""
