"""rknnrt's int8 against the vendor's, from recorded measurements (tests/quant/data, made by
tools/vendor_diff/regenerate.py with rknn-toolkit2 2.5.0): CI compares without the vendor.

The floors are the agreement reached when the rules of docs/quantization.md were adopted; a
change that loses agreement with the vendor fails here. The small models' records hold the
int8 value of every tensor the vendor's simulator rounds, on the test input: rknnrt's stored
tensors must equal them element by element, and store the same set."""

from __future__ import annotations

import json
import os

import pytest

from tools.vendor_diff.__main__ import diff
from tools.vendor_diff.compare import samples
from tools.vendor_diff.fixtures import FIXTURES
from tools.vendor_diff.regenerate import SAMPLES, SEED, expand

DATA = os.path.join(os.path.dirname(__file__), "data")

# fixture: (tensor agreement, min output cosine vs vendor, min fraction within one step,
# stored tensors NOT bit-equal to the simulator's (each within one step: a rounding tie))
FLOORS = {
    "avgpool_unit": (1.0, 0.99999, 1.0, 0),
    "bn_ties": (1.0, 0.999999, 1.0, 0),
    "sigmoid_range": (1.0, 0.99999, 1.0, 0),
    "light_squeezenet": (1.0, 0.9999, None, None),
    "light_inception_v1": (1.0, 0.9999, None, None),
    "light_inception_v2": (1.0, 0.9999, None, None),
    # ties amplified through the network (docs/quantization.md, "What still differs"): on
    # ResNet-50 which side of each tie wins moved the output's cosine between 0.989 and 0.997
    # here, and the sides depend on the CPU's float kernels (calibration); floors with margin
    "light_shufflenet": (1.0, 0.9997, None, None),
    "light_resnet50": (1.0, 0.98, None, None),
    "light_densenet121": (1.0, 0.9999, 0.999, None),
    "yolov5s_like": (1.0, 0.99999, 1.0, 0),
    "ocr_det_like": (1.0, 0.99999, 1.0, 1),
    "op_zoo": (1.0, 0.99995, None, 0),
    "two_io": (1.0, 0.99999, 1.0, 0),
    "mlp": (1.0, 0.99999, None, 0),
}
# tensors the vendor rounds that rknnrt does not store: op_zoo's linear Resize, which the
# vendor runs as a convolution (`resize26_conv`); rknnrt keeps the Resize
VENDOR_ONLY_STORED = {"op_zoo": ["resize26_conv"]}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n.startswith("light_") else n
     for n in sorted(FIXTURES)],
)  # fmt: skip
def test_agreement_with_the_recorded_vendor_build(name) -> None:
    model = FIXTURES[name]()
    with open(os.path.join(DATA, f"vendor_{name}.json")) as f:
        record = json.load(f)
    assert (record["samples"], record["seed"]) == (SAMPLES, SEED)
    names = [o.name for o in model.graph.output]
    data = samples(model, SAMPLES + 1, SEED)
    result = diff(model, expand(record["vendor"], names), data[:-1], data[-1])
    agreement, min_cos, min_within, not_equal = FLOORS[name]
    tensors = result["tensors"]
    assert len(tensors["pairs"]) >= 2
    assert tensors["agreement"] >= agreement, tensors
    assert tensors["stored_by_rknnrt_only"] == []
    assert tensors["stored_by_vendor_only"] == VENDOR_ONLY_STORED.get(name, [])
    # calibrated ranges within ~6e-5 of the vendor's (their last bits depend on the float
    # kernels of the CPU that runs the calibration: docs/quantization.md)
    assert tensors["range_max_ulps"] <= 1000
    if not_equal is not None:
        assert tensors["valued"] == len(tensors["pairs"])  # every shared tensor compared
        assert tensors["valued"] - tensors["bit_equal"] <= not_equal, tensors
        assert tensors["max_steps"] <= 1
        # each op from the vendor's own inputs: at most a tie away
        assert tensors["valued_single"] >= tensors["valued"] - len(model.graph.input) - len(
            model.graph.output)  # fmt: skip
        assert tensors["max_steps_single"] <= 1
        # every single-layer difference is a rounding tie: no weight, bias or rule differs
        assert tensors["off_tie_single"] == 0, tensors
    for out in result["outputs"]:
        assert out["cosine"] >= min_cos, out
        if min_within is not None:
            assert out["within_one"] >= min_within, out
    # the model inputs: same int8 scale/zp as the vendor's in every build
    for vi in model.graph.input:
        ours, theirs = result["io"][vi.name]["rknnrt"], result["io"][vi.name]["vendor"]
        assert ours["dtype"] == theirs["dtype"] == "int8"
        assert ours["zp"] == theirs["zp"]
        assert abs(ours["scale"] - theirs["scale"]) <= 1e-6 * theirs["scale"] + 1e-9


def test_matching_undoes_the_vendor_renames() -> None:
    from tools.vendor_diff.compare import match

    ours = {"a": {"scale": 0.5, "zp": 1}, "out": {"scale": 0.25, "zp": -128},
            "b": {"scale": 1.0, "zp": 0}}  # fmt: skip
    vendor = {"a": {"dtype": "int8", "scale": 0.5, "zp": 1},
              "out": {"dtype": "float32"},
              "out_int8": {"dtype": "int8", "scale": 0.25000001, "zp": -128},
              "a_mp": {"dtype": "int8", "scale": 0.5, "zp": 1},
              "b-rs": {"dtype": "int8", "scale": 1.1, "zp": 0}}  # fmt: skip
    result = match(ours, vendor)
    assert set(result["pairs"]) == {"a", "out", "b"}
    assert result["pairs"]["out"]["vendor_name"] == "out_int8" and result["pairs"]["out"]["agree"]
    assert not result["pairs"]["b"]["agree"] and result["pairs"]["b"]["scale_rel"] > 0.09
    assert result["vendor_only"] == ["a_mp"] and result["agreement"] == pytest.approx(2 / 3)


def test_single_layer_values_read_the_vendors_inputs() -> None:
    """Changing the vendor's recorded r1 (what `res` = r1 + conv(r1) reads) changes rknnrt's
    single-layer `res` and nothing in its own chain of values."""
    import base64
    import zlib

    import numpy as np

    model = FIXTURES["two_io"]()
    with open(os.path.join(DATA, "vendor_two_io.json")) as f:
        record = json.load(f)
    names = [o.name for o in model.graph.output]
    data = samples(model, SAMPLES + 1, SEED)
    vendor = expand(record["vendor"], names)
    r1 = vendor["tensors"]["r1"]
    q = np.frombuffer(zlib.decompress(base64.b64decode(r1["q"])), np.int8).reshape(r1["shape"])
    moved = np.clip(q.astype(np.int16) + 20, -128, 127).astype(np.int8)
    r1["q"] = base64.b64encode(zlib.compress(moved.tobytes())).decode()
    pairs = diff(model, vendor, data[:-1], data[-1])["tensors"]["pairs"]
    assert pairs["res"]["equal"] == 1.0  # rknnrt's own chain still equals the vendor's res
    assert pairs["res"]["equal_single"] < 0.5  # computed from the moved r1
    # not ties: the metric that clears the fixtures above sees these differences
    assert pairs["res"]["off_tie_single"] > pairs["res"]["differ_single"] // 2 > 0
    assert pairs["r1"]["equal"] < 0.5


def test_range_ulps_counts_float32_steps_between_calibrated_ranges() -> None:
    import numpy as np

    from tools.vendor_diff.compare import range_ulps

    hi = np.float32(5.136971)  # a calibrated range (max - min), float32
    assert range_ulps(float(hi) / 255, float(hi) / 255) == 0
    up = np.nextafter(np.nextafter(hi, np.float32(9)), np.float32(9))
    assert range_ulps(float(hi) / 255, float(up) / 255) == 2
    assert range_ulps(float(up) / 255, float(hi) / 255) == 2


def test_off_tie_counts_differences_away_from_a_rounding_tie() -> None:
    import numpy as np

    from tools.vendor_diff.compare import off_tie

    vendor = np.array([1, 2, 3, 127, -5], np.int8)
    ours = np.array([1, 3, 2, 126, -5], np.int8)
    exact = np.array([1.1, 2.5001, 2.7, 200.0, -5.5])  # rknnrt's values before rounding
    # 2.5001 is a tie (either side may win); 2.7 is not; nor is 200, beyond the int8 range
    assert off_tie(vendor, ours, exact) == 2
    assert off_tie(vendor, ours, exact, margin=0.25) == 1
