"""Estimated board FPS against the model zoo's published figures, per model and SoC.

    PYTHONPATH=$PWD python benchmarks/board_estimate.py            # int8 conversions (~1 min)
    PYTHONPATH=$PWD python benchmarks/board_estimate.py --float    # float graphs, no conversion
    PYTHONPATH=$PWD python benchmarks/board_estimate.py --fit      # refit the per-SoC constants

The published figures (rknn_model_zoo v2.3.2 README: `rknn.run` only, max NPU frequency, one
core, int8) are the baseline; the models are the architecture-true builds of
tests/board/zoo_models.py with generated weights, converted by rknnrt's own converter for
rk3588 (the layer list of the other SoCs follows from the same graph). It also prints the
multi-core scaling of YOLOv5s and its RKNN_QUERY_MEM_SIZE-relevant figures against the board
log (airockchip/rknn-toolkit2#129: weights 7,315,840 B, internal 6,144,000 B, 27.5 ms).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import sys
import time
from math import exp, log

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rknnrt.core import platforms  # noqa: E402
from rknnrt.core.board import layers as board_layers
from rknnrt.core.board import perf
from rknnrt.core.board import soc_costs as board_model
from rknnrt.model import container  # noqa: E402
from rknnrt.model.meta import ModelMeta  # noqa: E402
from tests.board.zoo_models import ZOO  # noqa: E402

SOCS = ("rk3566", "rk3562", "rk3588", "rk3576")
# FPS, rknn_model_zoo v2.3.2 README (as quoted in issue 16), in SOCS order.
PUBLISHED = {
    "mobilenetv2": (180.7, 281.3, 450.7, 467.0),
    "resnet50_v2": (37.9, 54.9, 110.1, 99.0),
    "yolov5s": (19.3, 23.6, 48.4, 57.5),
    "yolov8n": (34.0, 40.9, 73.5, 90.2),
    "deeplabv3_mobilenetv2": (10.9, 21.4, 34.0, 39.4),
}
YOLOV5S_LOG = {"weights": 7_315_840, "internal": 6_144_000, "ms": 27.5}


def convert_int8(model: onnx.ModelProto, target: str = "rk3588") -> bytes:
    """rknnrt's int8 conversion with one random calibration input (timing needs no accuracy)."""
    from rknnrt.toolkit import RKNN

    rknn = RKNN()
    assert rknn.config(target_platform=target) == 0
    assert rknn.load_onnx(model) == 0, rknn.last_error
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    sample = np.random.default_rng(0).random(dims, dtype=np.float32)
    if rknn.build(do_quantization=True, dataset=[[sample]]) != 0:
        raise RuntimeError(rknn.last_error)
    return rknn.model_bytes()


@dataclasses.dataclass
class Source:
    """One model's graph as the estimator reads it: a converted model or a float graph."""

    name: str
    graph: onnx.GraphProto
    shapes: dict[str, list[int]]
    meta: ModelMeta | None = None
    blob: bytes = b""

    def layers(self, soc: str) -> list[board_layers.Layer]:
        b = board_model.BOARDS[soc]
        return board_layers.vendor_layers(self.graph, self.shapes, 1, b.tile_bytes)


def float_source(name: str) -> Source:
    model = ZOO[name][0]()
    return Source(name, model.graph, board_layers.static_shapes(model))


def int8_source(name: str, blob: bytes) -> Source:
    sections = container.read(memoryview(blob))
    meta = ModelMeta.from_json(sections.metadata, len(sections.weights))
    weights = np.frombuffer(sections.weights, np.uint8)
    model = perf.model_with_constants(bytes(sections.graph), meta, weights)
    shapes = board_layers.static_shapes(model)
    for spec in [*meta.inputs, *meta.outputs]:
        shapes[spec.name] = list(spec.shape)
    return Source(name, model.graph, shapes, meta, blob)


def estimate_fps(source: Source, soc: str, board: board_model.Board | None = None) -> float:
    b = board or board_model.BOARDS[soc]
    return 1e6 / board_model.estimate(source.layers(soc), b, 1, 1)[1]


def ratios(sources: dict[str, Source]) -> dict[tuple[str, str], float]:
    return {
        (name, soc): estimate_fps(src, soc) / PUBLISHED[name][j]
        for name, src in sources.items()
        for j, soc in enumerate(SOCS)
    }


def geo_error(values: list[float]) -> float:
    """Geometric-mean error: exp(mean |log ratio|) - 1."""
    return exp(sum(abs(log(r)) for r in values) / len(values)) - 1


def fit(sources: dict[str, Source], socs: list[str]) -> None:
    """Grid search of mac_eff, bandwidth and layer_us per SoC (least squares on log FPS)."""
    peak = {"rk3566": 12.8, "rk3562": 12.8, "rk3588": 34.0, "rk3576": 17.0}  # DDR GB/s
    for soc in socs:
        j = SOCS.index(soc)
        layers = {n: s.layers(soc) for n, s in sources.items()}
        best = None
        grid = itertools.product(np.arange(0.3, 1.01, 0.02), np.arange(2, peak[soc] + 0.01, 0.5),
                                 np.arange(0, 40, 2))  # fmt: skip
        for eff, bw, layer_us in grid:
            b = dataclasses.replace(board_model.BOARDS[soc], mac_eff=round(eff, 2),
                                    bw_gbps=float(bw), layer_us=float(layer_us))  # fmt: skip
            err = sum(
                log(1e6 / board_model.estimate(layers[n], b, 1)[1] / PUBLISHED[n][j]) ** 2
                for n in sources
            )
            if best is None or err < best[0]:
                best = (err, b)
        assert best is not None
        b = best[1]
        print(f"{soc}: mac_eff {b.mac_eff:.2f}, bw_gbps {b.bw_gbps:.1f}, layer_us {b.layer_us:.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--float", action="store_true", help="float graphs, no conversion")
    parser.add_argument("--fit", action="store_true", help="refit the per-SoC constants")
    parser.add_argument("--socs", default=",".join(SOCS), help="SoCs to refit (--fit)")
    args = parser.parse_args()
    start = time.perf_counter()
    sources = {}
    for name in ZOO:
        if args.float:
            sources[name] = float_source(name)
        else:
            try:
                sources[name] = int8_source(name, convert_int8(ZOO[name][0]()))
            except RuntimeError as exc:  # a converter limitation: estimate the float graph
                print(f"{name}: int8 conversion failed ({exc}); using its float graph")
                sources[name] = float_source(name)
    print(f"models ready in {time.perf_counter() - start:.1f} s "
          f"({'float graphs' if args.float else 'rknnrt int8 conversions'})\n")  # fmt: skip
    if args.fit:
        fit(sources, args.socs.split(","))
        return 0
    found = ratios(sources)
    print(f"{'model':<24}{'SoC':<8}{'published FPS':>14}{'estimated FPS':>15}{'ratio':>8}")
    for (name, soc), ratio in found.items():
        published = PUBLISHED[name][SOCS.index(soc)]
        print(f"{name:<24}{soc:<8}{published:>14.1f}{published * ratio:>15.1f}{ratio:>8.3f}")
    values = list(found.values())
    print(f"\nratios {min(values):.3f} .. {max(values):.3f} (target 0.75 .. 1.33); "
          f"geometric-mean error {100 * geo_error(values):.1f} % (target <= 15 %)")  # fmt: skip
    yolo = sources["yolov5s"]
    rk3588 = platforms.get("rk3588")
    times = []
    for cores in (1, 2, 3):
        b = board_model.BOARDS["rk3588"]
        times.append(board_model.estimate(yolo.layers("rk3588"), b, 1, cores)[1] / 1e3)
    print(f"\nYOLOv5s on RK3588, 1/2/3 cores: {times[0]:.2f} / {times[1]:.2f} / {times[2]:.2f} ms "
          f"(speed-up {times[0] / times[1]:.2f}x / {times[0] / times[2]:.2f}x); board log "
          f"single core {YOLOV5S_LOG['ms']} ms (runtime 2.1.0, SiLU), zoo 20.7 ms")  # fmt: skip
    if yolo.meta is not None:
        weights = np.frombuffer(container.read(memoryview(yolo.blob)).weights, np.uint8)
        view = perf.board_view(yolo.meta, bytes(container.read(memoryview(yolo.blob)).graph),
                               weights, rk3588)  # fmt: skip
        board_w, board_i = view.memory()
        mem_w, mem_i = yolo.meta.memory.weight_size, max(yolo.meta.memory.internal_size, board_i)
        print(f"YOLOv5s RKNN_QUERY_MEM_SIZE on RK3588: weights {mem_w} B "
              f"({mem_w / YOLOV5S_LOG['weights']:.3f} of the log), internal {mem_i} B "
              f"({mem_i / YOLOV5S_LOG['internal']:.3f}); board packing of the weights {board_w} B "
              f"({board_w / YOLOV5S_LOG['weights']:.3f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
