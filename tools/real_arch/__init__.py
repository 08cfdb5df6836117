"""Real-architecture ONNX graphs built from a seed (catalog.py)."""
