"""The matmul engine behind rknn_matmul_api.h: C = A·B with no model (facts §4.2, §5.11).

`MatmulContext` validates at create time, copies and converts A and B when they are bound
(rknn_matmul_set_io_mem rearranges the data, UG 3.5.2: bind again after changing it) and runs
blindly on numpy's BLAS. Numerics (docs/matmul.md, "Numerics"):

- float A (fp16): float32 products and accumulation; B of an integer type is dequantised to
  float32 ((B - zp)·scale) when the run is prepared.
- integer A and B: exact integer sums (float32 BLAS on chunks of K whose sums stay below 2^24,
  added in float64). Per-group B (float C only) is dequantised to float32 like the float types:
  the group scales make the sum a float sum, accumulated in fp32.
- C: int32/int16 raw sums (saturated); int8 `clamp(round(acc·sA·sB/sC) + zpC)` with round half
  away from zero; float32, float16 (IEEE round to nearest even) and bfloat16 (same) of
  `acc·sA·sB/sC`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ...model import numerics
from .. import guard, log, registry
from ..errors import FAIL, PARAM_INVALID, RknnError
from ..io import memory
from ..platforms import MatmulFacts, Platform
from . import layouts as lay
from .spec import (  # noqa: F401 - re-exported: the matmul API's names live here
    DEFAULT_PLATFORM,
    EXACT_INT_LIMIT,
    LAYOUTS,
    PLATFORM_ENV,
    QUANT_TYPES,
    TYPES,
    MatmulSpec,
    MatmulType,
    Shape,
    TensorAttr,
    Window,
    check_spec,
    emulated_platform,
    facts_for,
    plan,
)  # fmt: skip


@dataclass
class Quant:
    """Scale and zero point of one tensor, as set (float32 scales widened to float64)."""

    scale: np.ndarray = field(default_factory=lambda: np.ones(1))
    zp: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))


@dataclass
class _Prepared:
    """What a run needs of B and the quantisation, computed once per binding and parameters."""

    b: np.ndarray  # float32: dequantised B (float path) or integer B (exact path)
    mult: np.ndarray | float  # sA·sB/sC: per column (exact path) or one float (float path)
    colsum: np.ndarray | None = None  # Σ_k B, for A's zero point
    chunk: int = 0  # exact path: K rows per float32 product
    out: np.ndarray | None = None  # [M, N] float32, reused by every run (no fresh pages)


@dataclass
class _Input:
    """A bound A or B: the converted copy, and a sample of the caller's bytes taken then."""

    values: np.ndarray
    window: Window
    probe: np.ndarray
    seen: np.ndarray
    warned: bool = False

    @classmethod
    def take(cls, values: np.ndarray, window: Window, size: int) -> _Input:
        probe = np.unique(np.linspace(0, size - 1, min(size, 257)).astype(np.intp))
        return cls(values, window, probe, window.cpu[probe].copy())

    def check(self, name: str) -> None:
        """Warn once when rknnrt memory changed after set_io_mem (the run uses the old copy)."""
        w = self.window
        if self.warned or w.alive is None or not w.alive():
            return
        if not np.array_equal(w.cpu[self.probe], self.seen):
            self.warned = True
            log.warning(
                f"rknn_matmul_run: the memory of {name} changed after "
                f"rknn_matmul_set_io_mem, which copied and rearranged it then; this run "
                f"uses the old data: call rknn_matmul_set_io_mem({name}) after each "
                "change (UG 3.5.2)"
            )


class MatmulContext:
    """One rknn_matmul_ctx: the spec, its shapes, the bound memory and quantisation."""

    def __init__(self, platform: Platform, spec: MatmulSpec, shapes: list[Shape]) -> None:
        self.guard = guard.CallGuard("matmul context")
        self.platform = platform
        self.mtype = check_spec(platform, spec)
        self.facts, self.spec, self.shapes = facts_for(platform), spec, shapes
        self.attrs = [
            plan(self.facts, self.mtype, spec, s, f"shape {i} {tuple(s)}")
            for i, s in enumerate(shapes)
        ]
        self.current = 0
        self.core_mask = 0
        self.quant = {"A": Quant(), "B": Quant(), "C": Quant()}
        self._bound: dict[str, _Input] = {}  # A, B
        self._c: Window | None = None
        self._serial = 0  # bumps whenever B or the quantisation changes
        self._prepared: tuple[int, _Prepared] | None = None

    # -- state ------------------------------------------------------------------------------
    @contextmanager
    def call(self, name: str) -> Iterator[MatmulContext]:
        """Run one API call (core/guard.py: a second thread waits, destroyed is refused)."""
        self.guard.enter(name)
        try:
            yield self
        finally:
            self.guard.leave()

    @property
    def destroyed(self) -> bool:
        return self.guard.closed

    @property
    def shape(self) -> Shape:
        return self.shapes[self.current]

    def close(self, handle: int) -> None:
        """rknn_matmul_destroy: wait for a call in progress, unregister, tear down."""

        def teardown() -> None:
            registry.remove(handle)
            self.destroy()

        self.guard.close("rknn_matmul_destroy", teardown)
        leaked = memory.TABLE.release_owned(handle)
        if leaked:
            log.warning(f"rknn_matmul_destroy: {leaked} rknn_tensor_mem made on this context "
                        "were not destroyed with rknn_destroy_mem; freed now")  # fmt: skip

    def destroy(self) -> None:
        self._bound.clear()
        self._c = None
        self._prepared = None

    def set_core_mask(self, mask: int) -> None:
        if not self.platform.core_masks:
            raise RknnError(FAIL, f"not supported on {self.platform.name} (one NPU core)")
        if mask not in self.platform.core_masks:
            valid = ", ".join(hex(m) for m in sorted(self.platform.core_masks))
            raise RknnError(PARAM_INVALID, f"core mask {mask:#x} is not valid here; valid: {valid}")
        if mask.bit_count() > 1:  # the board's words (airockchip/rknn-toolkit2#7, #253)
            self.core_mask = 0
            raise RknnError(
                FAIL,
                f"Not support core mask: {mask}, fallback to single core auto "
                "mode (matmul runs on one core; use several contexts)",
            )
        self.core_mask = mask

    def set_dynamic_shape(self, shape: Shape) -> None:
        if shape not in self.shapes:
            listed = ", ".join(str(tuple(s)) for s in self.shapes)
            raise RknnError(
                PARAM_INVALID,
                f"shape (M, K, N) = {tuple(shape)} was not given to "
                f"rknn_matmul_create_dynamic_shape; choose one of {listed}",
            )
        index = self.shapes.index(shape)
        if index != self.current:
            # A and C are laid out per M: bind them again. B stays bound while K and N (so its
            # layout) do not change, as on a board (the dynamic-shape demo binds B once).
            keep_b = self.attrs[index]["B"] == self.attrs[self.current]["B"]
            self.current = index
            b = self._bound.get("B") if keep_b else None
            self._bound = {"B": b} if b is not None else {}
            self._c = None
            self._serial += 1

    # -- quantisation -------------------------------------------------------------------------
    def _expected_len(self, name: str) -> int:
        if name != "B" or self.spec.b_quant.startswith("PER_LAYER"):
            return 1
        m, k, n = self.shape
        return n if self.spec.b_quant.startswith("PER_CHANNEL") else k // self.spec.group_size * n

    def set_quant_params(self, name: str, scale: np.ndarray, zp: np.ndarray) -> None:
        attr = self._attr_named(name, "params->name")
        if self.mtype.a == self.mtype.b == "float16" or (name == "C" and self.mtype.raw_output):
            raise RknnError(
                PARAM_INVALID, f"{name} of {self.mtype.name} has no quantisation parameters"
            )
        need = self._expected_len(name)
        if scale.size != need or zp.size not in (0, need):
            raise RknnError(
                PARAM_INVALID,
                f"{name}: scale_len {scale.size} / zp_len {zp.size} "
                f"must be {need} / 0 or {need} for this quant type and shape",
            )
        if not np.all(np.isfinite(scale) & (scale > 0)):
            raise RknnError(PARAM_INVALID, f"{name}: every scale must be finite and > 0")
        zp = zp.astype(np.int64) if zp.size else np.zeros(need, np.int64)
        lo, hi = lay.RANGE.get(attr.dtype, (0, 0))  # float tensors: zero point 0
        quant_type = self.spec.b_quant if name == "B" else self.spec.ac_quant
        if quant_type.endswith("_SYM"):
            lo = hi = 0
        if zp.size and (zp.min() < lo or zp.max() > hi):
            raise RknnError(
                PARAM_INVALID,
                f"{name}: zero points must lie in [{lo}, {hi}] "
                f"({attr.dtype}, RKNN_QUANT_TYPE_{quant_type})",
            )
        self.quant[name] = Quant(scale.astype(np.float32).astype(np.float64), zp)
        self._serial += 1

    def get_quant_params(self) -> tuple[float, Quant]:
        """(B's normalised scale: C's scale is A's times it, B's parameters as set)."""
        if self.mtype.name != "RKNN_INT8_MM_INT8_TO_INT32":
            raise RknnError(PARAM_INVALID, "only supported for RKNN_INT8_MM_INT8_TO_INT32")
        return float(self.quant["B"].scale.max()), self.quant["B"]

    # -- memory -------------------------------------------------------------------------------
    def _attr_named(self, name: str, what: str) -> TensorAttr:
        attrs = self.attrs[self.current]
        if name not in attrs:
            raise RknnError(
                PARAM_INVALID, f"{what} '{name}' is not A, B or C; use the names in io_attr"
            )
        return attrs[name]

    def set_io_mem(self, given: TensorAttr, window: Window) -> None:
        attr = self._attr_named(given.name, "attr->name")
        if given != attr:
            raise RknnError(
                PARAM_INVALID,
                f"attr of {attr.name} (dims {list(given.dims)}, size "
                f"{given.size}) is not the current shape's (dims {list(attr.dims)}, "
                f"size {attr.size}); pass io_attr.{attr.name} of the shape in use",
            )
        if window.cpu.size < attr.size:
            raise RknnError(
                PARAM_INVALID,
                f"mem of {window.cpu.size} bytes < io_attr."
                f"{attr.name}.size = {attr.size}; allocate rknn_create_mem(ctx, "
                f"io_attr.{attr.name}.size)",
            )
        if attr.name == "C":
            self._c = window
            return
        self._bound[attr.name] = _Input.take(self._read(attr, window.cpu), window, attr.size)
        if attr.name == "B":
            self._serial += 1

    def _read(self, attr: TensorAttr, raw: np.ndarray) -> np.ndarray:
        """A as float32 [M, K]; B as float32 [K, N] (fp16) or int16 [K, N]: copies."""
        m, k, n = self.shape
        flat = lay.from_bytes(raw, int(np.prod(attr.dims)), attr.dtype)
        if attr.name == "A":
            a = (
                flat.reshape(m, k)
                if self.spec.ac_layout == "NORM"
                else lay.from_perf(flat, m, k, self.facts.a_sub[self.mtype.a])
            )
            return np.ascontiguousarray(a, np.float32)
        if self.spec.b_layout == "NATIVE":
            sub_n, sub_k = self.facts.b_sub[self.mtype.a]
            b = lay.from_native_b(flat, k, n, sub_n, sub_k, self.facts.k_segment)
        else:
            b = flat.reshape(k, n) if self.spec.b_layout == "NORM" else flat.reshape(n, k).T
        return np.ascontiguousarray(b, np.float32 if attr.dtype == "float16" else np.int16)

    # -- run ----------------------------------------------------------------------------------
    def run(self) -> None:
        missing = [x for x in "AB" if x not in self._bound] + ["C"] * (self._c is None)
        if missing:
            raise RknnError(
                PARAM_INVALID,
                f"{', '.join(missing)} not set: call "
                "rknn_matmul_set_io_mem for A, B and C (A and C again after "
                "rknn_matmul_set_dynamic_shape, B too when K or N changed)",
            )
        c_window = self._c
        assert c_window is not None
        if c_window.alive is not None and not c_window.alive():
            raise RknnError(PARAM_INVALID, "the memory bound to C was destroyed; bind live memory")
        for name, bound in self._bound.items():
            bound.check(name)
        if self._prepared is None or self._prepared[0] != self._serial:
            prepared = self._prepare()
            prepared.out = np.empty((self.shape.M, self.shape.N), np.float32)
            self._prepared = (self._serial, prepared)
        prep, attr = self._prepared[1], self.attrs[self.current]["C"]
        direct = None  # float32 C in the normal layout: BLAS writes straight into its memory
        if attr.dtype == "float32" and self.spec.ac_layout == "NORM" and not prep.chunk:
            if c_window.cpu.ctypes.data % 4 == 0:
                direct = c_window.cpu[: attr.size].view(np.float32).reshape(self.shape.M, -1)
        values = self._compute(self._bound["A"].values, prep, direct)
        if direct is None:
            self._write_c(values, c_window)
        else:
            self._mirror(c_window, attr.size)

    def _prepare(self) -> _Prepared:
        m, k, n = self.shape
        qa, qb, qc = self.quant["A"], self.quant["B"], self.quant["C"]
        need = self._expected_len("B")
        if qb.scale.size not in (1, need):  # 1: never set, scale 1.0 everywhere (RT)
            raise RknnError(
                PARAM_INVALID,
                f"B has {qb.scale.size} quantisation scales but shape "
                f"{tuple(self.shape)} needs {need}; call "
                "rknn_matmul_set_quant_params again",
            )
        b = self._bound["B"].values
        if self.mtype.b == "float16":
            return _Prepared(b, float(qa.scale[0] / qc.scale[0]))
        group = self.spec.group_size if self.spec.b_quant.startswith("PER_GROUP") else 0
        rows = k // group if group else 1
        s_b = np.broadcast_to(
            qb.scale.reshape(rows, -1) if qb.scale.size > 1 else qb.scale, (rows, n)
        )
        z_b = np.broadcast_to(qb.zp.reshape(rows, -1) if qb.zp.size > 1 else qb.zp, (rows, n))
        if group:
            s_b, z_b = np.repeat(s_b, group, axis=0), np.repeat(z_b, group, axis=0)
        centred = b.astype(np.int64) - z_b  # B - zp, exact
        a_scale = qa.scale[0] / qc.scale[0]
        if self.mtype.a == "float16" or group:  # dequantise B; fp32 sums as for float types
            deq = np.ascontiguousarray(
                numerics.dequantize(b, s_b, z_b, precision=np.float64), np.float32
            )
            colsum = deq.sum(axis=0, dtype=np.float64) if qa.zp[0] else None
            return _Prepared(deq, a_scale, colsum)
        mult = qa.scale[0] * s_b[0] / qc.scale[0]
        if self.mtype.raw_output:  # one scale for C: B renormalised to max(scale) (get_quant)
            ratio = s_b[0] / s_b[0].max()
            if not np.all(ratio == 1):
                centred = numerics.half_away_from_zero(centred * ratio).astype(np.int64)
        bound = max(1, int(np.abs(centred).max(initial=0)))
        a_bound = -lay.RANGE[self.mtype.a][0]
        colsum = centred.sum(axis=0, dtype=np.int64).astype(np.float64) if qa.zp[0] else None
        return _Prepared(
            centred.astype(np.float32), mult, colsum, max(1, EXACT_INT_LIMIT // (a_bound * bound))
        )

    def _compute(self, a: np.ndarray, prep: _Prepared, out: np.ndarray | None) -> np.ndarray:
        """The sums of A·B scaled to C's units (before C's dtype): [M, N]; the float path
        writes into `out` (C's own memory) when given."""
        zp_a = float(self.quant["A"].zp[0])
        if prep.chunk:  # exact integer sums
            k = a.shape[1]
            if k <= prep.chunk:
                acc = np.matmul(a, prep.b, out=prep.out)
            else:
                acc = np.zeros((a.shape[0], prep.b.shape[1]))
                for s in range(0, k, prep.chunk):
                    acc += np.matmul(
                        a[:, s : s + prep.chunk], prep.b[s : s + prep.chunk], out=prep.out
                    )
            if prep.colsum is not None:
                acc = acc - zp_a * prep.colsum
            if self.mtype.raw_output:
                return acc
            return acc * prep.mult  # float64 for int8 rounding and float outputs
        acc = np.matmul(a, prep.b, out=prep.out if out is None else out)
        if prep.colsum is not None:
            acc -= (zp_a * prep.colsum).astype(np.float32)
        if prep.mult != 1.0:
            acc *= np.float32(prep.mult)
        return acc

    def _write_c(self, values: np.ndarray, window: Window) -> None:
        attr = self.attrs[self.current]["C"]
        native = self.spec.ac_layout == "NATIVE"
        # numpy converts to float16 one element at a time (~6 ns each); onnxruntime's Cast is
        # vectorised but costs ~0.1 ms a call: it pays from some 30 000 elements on.
        if attr.dtype == "float16" and values.dtype == np.float32 and values.size >= 32768:
            if not native:  # straight into C's memory
                lay.half(values, window.cpu[: attr.size].view(np.float16).reshape(values.shape))
                self._mirror(window, attr.size)
                return
            out = lay.half(values)
        else:
            out = lay.to_dtype(values, attr.dtype, float(self.quant["C"].zp[0]))
        if native:
            out = lay.to_perf(out, self.facts.c_sub[attr.dtype])
        window.cpu[: attr.size] = out.reshape(-1).view(np.uint8)
        self._mirror(window, attr.size)

    @staticmethod
    def _mirror(window: Window, size: int) -> None:
        """The NPU wrote C, and the runtime invalidated the CPU's cache: both views agree."""
        device = window.device() if window.device is not None else None
        if device is not None:
            device[:size] = window.cpu[:size]


def normal_to_native_b(
    raw: np.ndarray, k: int, n: int, mtype: MatmulType, facts: MatmulFacts
) -> np.ndarray:
    """rknn_B_normal_layout_to_native_layout: bytes of B [K, N] -> bytes of native B."""
    b = lay.from_bytes(raw, k * n, mtype.b).reshape(k, n)
    sub_n, sub_k = facts.b_sub[mtype.a]
    return lay.to_bytes(lay.to_native_b(b, sub_n, sub_k, facts.k_segment), mtype.b)
