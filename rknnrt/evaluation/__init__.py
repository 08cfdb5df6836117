"""Dataset-scale evaluation of converted models: `evaluate()` (behind `rknnrt eval`) and
`sweep()` (behind `rknnrt sweep`), on one process, a local process pool or a Ray cluster.

It runs models only through the public runtime API (`import rknnrt as rk`) and converts them
with `rknnrt.toolkit`; it never reaches into `rknnrt.core`.
"""

from .data import DatasetError, Sample, list_samples
from .drift import layer_drift
from .evaluate import EvalResult, evaluate
from .metrics import Accuracy, DetectionMAP, Metric, mean_average_precision
from .sweep import load_grid, sweep

__all__ = [
    "Accuracy",
    "DatasetError",
    "DetectionMAP",
    "EvalResult",
    "Metric",
    "Sample",
    "evaluate",
    "layer_drift",
    "list_samples",
    "load_grid",
    "mean_average_precision",
    "sweep",
]
