"""Darknet weights of the real layout for any cfg: header, then per convolutional layer biases
(+ BN scales, means, variances) and weights, drawn from one seed (replays' yolov3.weights)."""

from __future__ import annotations

import numpy as np

from rknnrt.toolkit.loaders.darknet import parse_cfg


def weights_for(cfg_text: str, seed: int = 0) -> bytes:
    rng = np.random.RandomState(seed)
    sections = parse_cfg(cfg_text, "cfg")
    channels = [int(sections[0][1].get("channels", 3))]  # [0]: the input; then per layer
    parts = [np.array([0, 2, 0], np.int32).tobytes(), np.zeros(1, np.int64).tobytes()]
    for index, (kind, o) in enumerate(sections[1:]):
        c = channels[-1]
        if kind == "convolutional":
            f, k = int(o["filters"]), int(o.get("size", 1))
            bias = rng.randn(f) * 0.1
            if int(o.get("batch_normalize", 0)):
                # scales, means, variances that keep activations near unit size over 75
                # layers with residual additions (random weights otherwise grow to ~1e6)
                bn = [rng.rand(f) * 0.3 + 0.3, rng.randn(f) * 0.05, rng.rand(f) + 1.5]
            else:
                bn = []
            w = rng.randn(f * c * k * k) * np.sqrt(1.0 / (c * k * k))
            parts += [np.asarray(a, np.float32).tobytes() for a in (bias, *bn, w)]
            c = f
        elif kind == "route":
            refs = [int(v) for v in o["layers"].split(",")]
            c = sum(channels[1 + (index + r if r < 0 else r)] for r in refs)
        channels.append(c)
    return b"".join(parts)
