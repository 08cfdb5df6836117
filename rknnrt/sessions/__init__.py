"""The one door to onnxruntime: every session of the package is opened here.

`factory.create(model, policy, ...)` opens a session under one of the named policies of
`policies.py` (threads, spinning, graph optimisation, exact int8 kernels, fallback off); the runtime
(core/) and the converter (toolkit/) both import it, and neither imports the other.
`int8_kernels.py` probes, once per process, whether onnxruntime's fast int8 kernels are exact on
this CPU (the exact-int8 part of every policy that asks for it). `kernels/` is rknnrt's own
onnxruntime custom-op library (C, built on first use and cached), which `factory` registers for
a graph that uses its domain.
"""
