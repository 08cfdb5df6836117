"""Vendor .rknn fixtures (tests/vendor/fixtures, made by make_fixtures.py with the vendor's
rknn-toolkit2 2.5.0): each `<model>_<platform>_<dtype>.rknn` comes with an `.npz` of 3 inputs
and the vendor simulator's outputs, and `reported.json` holds what the toolkit reported."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).parent / "fixtures"
REPORTED: dict = json.loads((FIXTURES / "reported.json").read_text())
STEMS = sorted(REPORTED)

# What rknn_init refuses among the fixtures, and the words its one log line must contain
# (docs/vendor-rknn.md); empty since int8 ConvSigmoid / ConvExSwish decode on all platforms.
UNSUPPORTED: dict[str, str] = {}
SUPPORTED = [s for s in STEMS if s not in UNSUPPORTED]


def model_bytes(stem: str) -> bytes:
    return (FIXTURES / f"{stem}.rknn").read_bytes()


def reference(stem: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / f"{stem}.npz", allow_pickle=False) as data:
        return {k: data[k] for k in data.files}
