"""The matmul API's engine (rknn_matmul_*): types and shapes (`spec.py`), the native layouts of A,
B and C (`layouts.py`) and the context that computes C = A x B (`engine.py`, the door)."""
