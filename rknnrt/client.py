"""`Client`: one context of the C-shaped API, driven as a board application drives it.

The one Python place that calls rknn_init / rknn_query / rknn_inputs_set / rknn_run /
rknn_outputs_get / rknn_outputs_release / rknn_destroy for rknnrt's own users (the middle four
also as one call, rknnrt_inference, for RKNNLite.inference; and, where the platform's runtime
lacks the general API, as rv1103/rv1106's mini runtime does, rknn_create_mem / rknn_set_io_mem /
rknn_destroy_mem: `ZeroCopyIO`, as the vendor's demos for those chips): RKNNLite
(lite.py), the command line (cli.py), the evaluation (evaluation/runner.py) and the board
estimate (board_eval.py). A failed call raises `ClientError` naming the call and its status; the
runtime has already printed its `E RKNN:` line, so users only translate the exception into their
own convention (RKNNLite: -1 or None; the CLI: exit; the evaluation: EvaluationError).

Settings are arguments: `threads` is the onnxruntime thread count of the context's programs
(the RKNNRT_NUM_THREADS switch, overridden for rknn_init only).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import numpy as np

from . import api as rk
from .api.marshal import log_muted
from .core import registry, switches


class ClientError(RuntimeError):
    """A C-API call that returned a status other than RKNN_SUCC."""

    def __init__(self, call: str, status: int) -> None:
        super().__init__(f"{call} failed: {status}")
        self.call, self.status = call, status


def check(call: str, status: int) -> None:
    if status != rk.RKNN_SUCC:
        raise ClientError(call, status)


class Client:
    """rknn_init of `model` with `flag`, and the inputs' and outputs' attributes."""

    def __init__(self, model: bytes, flag: int = 0, *, threads: int | None = None) -> None:
        self.flag = flag
        self.ctx = rk.rknn_context(0)
        with switches.override(switches.NUM_THREADS, threads):
            check("rknn_init", rk.rknn_init(ctypes.byref(self.ctx), model, len(model), flag, None))
        try:
            self._describe()
        except ClientError:
            self.close()
            raise

    def _describe(self) -> None:
        num = rk.rknn_input_output_num()
        self.query(rk.RKNN_QUERY_IN_OUT_NUM, num)
        self.inputs = [self.attr(rk.RKNN_QUERY_INPUT_ATTR, i) for i in range(num.n_input)]
        self.outputs = [self.attr(rk.RKNN_QUERY_OUTPUT_ATTR, i) for i in range(num.n_output)]
        dyn = rk.rknn_input_range(index=0)
        # a probe whose failure is an answer (a static model), not an error
        self.dynamic = self.status(rk.RKNN_QUERY_INPUT_DYNAMIC_RANGE, dyn, quiet=True) == 0 \
            and dyn.shape_number > 0  # fmt: skip
        # a static model's output shapes never change: get_outputs asks for them only when
        # they may (a query per output costs ~30 us after a run has pushed it out of cache)
        self.output_shapes = None if self.dynamic else [
            list(a.dims[: a.n_dims]) for a in self.outputs]  # fmt: skip
        # the mini runtime (librknnmrt) has no rknn_inputs_set/outputs_get: IO goes through
        # zero-copy memory there
        self.general_api = registry.get(self.ctx.value).platform.supports("rknn_inputs_set")

    def dup(self) -> Client:
        """A context from rknn_dup_context: same model and weights, its own buffers."""
        other = object.__new__(type(self))
        other.flag, other.inputs, other.outputs = self.flag, self.inputs, self.outputs
        other.dynamic, other.general_api = self.dynamic, self.general_api
        other.output_shapes = self.output_shapes
        other.ctx = rk.rknn_context(0)
        check("rknn_dup_context",
              rk.rknn_dup_context(ctypes.byref(self.ctx), ctypes.byref(other.ctx)))  # fmt: skip
        return other

    @property
    def alive(self) -> bool:
        return bool(self.ctx.value)

    def status(self, cmd: int, info: ctypes.Structure, quiet: bool = False) -> int:
        """rknn_query's status (`quiet`: without its E line, for probes)."""
        if quiet:
            with log_muted():
                return rk.rknn_query(self.ctx, cmd, ctypes.byref(info), ctypes.sizeof(info))
        return rk.rknn_query(self.ctx, cmd, ctypes.byref(info), ctypes.sizeof(info))

    def query(self, cmd: int, info: ctypes.Structure) -> None:
        status = rk.rknn_query(self.ctx, cmd, ctypes.byref(info), ctypes.sizeof(info))
        if status != rk.RKNN_SUCC:  # the name is formatted only on failure (a hot path)
            raise ClientError(f"rknn_query({cmd})", status)

    def attr(self, cmd: int, index: int) -> rk.rknn_tensor_attr:
        attr = rk.rknn_tensor_attr(index=index)
        self.query(cmd, attr)
        return attr

    def set_core_mask(self, mask: int) -> None:
        status = rk.rknn_set_core_mask(self.ctx, mask)
        if status != rk.RKNN_SUCC:
            raise ClientError(f"rknn_set_core_mask({mask:#x})", status)

    def register_custom_ops(self, ops: Sequence[object]) -> None:
        check(
            "rknn_register_custom_ops", rk.rknn_register_custom_ops(self.ctx, list(ops), len(ops))
        )

    def set_input_shapes(self, shapes: Sequence[Sequence[int]]) -> None:
        """rknn_set_input_shapes (4-D shapes NHWC)."""
        attrs = (rk.rknn_tensor_attr * len(shapes))()
        for i, shape in enumerate(shapes):
            attrs[i].index, attrs[i].n_dims = i, len(shape)
            attrs[i].fmt = rk.RKNN_TENSOR_NHWC if len(shape) == 4 else rk.RKNN_TENSOR_UNDEFINED
            for d, v in enumerate(shape):
                attrs[i].dims[d] = v
        check("rknn_set_input_shapes", rk.rknn_set_input_shapes(self.ctx, len(shapes), attrs))

    def set_inputs(
        self, arrays: Sequence[np.ndarray], types: Sequence[int], fmts: Sequence[int],
        pass_through: Sequence[int] | None = None,
    ) -> None:  # fmt: skip
        """rknn_inputs_set: each array (C-contiguous, kept alive by the caller until the run)
        with its rknn_tensor_type and rknn_tensor_format."""
        passes = pass_through or [0] * len(arrays)
        c_inputs = (rk.rknn_input * len(arrays))()
        for i, (x, kind, fmt, pt) in enumerate(zip(arrays, types, fmts, passes)):
            c_inputs[i].index, c_inputs[i].buf, c_inputs[i].size = i, x.ctypes.data, x.nbytes
            c_inputs[i].type, c_inputs[i].fmt, c_inputs[i].pass_through = kind, fmt, int(pt)
        check("rknn_inputs_set", rk.rknn_inputs_set(self.ctx, len(arrays), c_inputs))

    def run(self) -> None:
        check("rknn_run", rk.rknn_run(self.ctx, None))

    def infer(
        self, arrays: Sequence[np.ndarray], types: Sequence[int], fmts: Sequence[int],
        pass_through: Sequence[int] | None = None,
    ) -> list[np.ndarray]:  # fmt: skip
        """set_inputs, run and get_outputs as one call of the API (rknnrt_inference: the same
        steps without their marshalling, RKNNLite.inference's hot path)."""
        status, outputs = rk.rknnrt_inference(self.ctx, arrays, types, fmts, len(self.outputs),
                                              pass_through)  # fmt: skip
        check("rknnrt_inference", status)
        return [out.reshape(self._output_shape(i)) for i, out in enumerate(outputs)]

    def get_outputs(self) -> list[np.ndarray]:
        """rknn_outputs_get as float32 copies in the shapes in effect (a dynamic-shape model's
        depend on its current inputs), then rknn_outputs_release."""
        count = len(self.outputs)
        c_outputs = (rk.rknn_output * count)()
        for o in c_outputs:
            o.want_float = 1
        check("rknn_outputs_get", rk.rknn_outputs_get(self.ctx, count, c_outputs, None))
        results = []
        try:
            for i, o in enumerate(c_outputs):
                data = np.frombuffer((ctypes.c_char * o.size).from_address(o.buf), np.float32)
                results.append(data.reshape(self._output_shape(i)).copy())
        finally:
            rk.rknn_outputs_release(self.ctx, count, c_outputs)
        return results

    def _output_shape(self, index: int) -> list[int]:
        """Output `index`'s dims in effect (a dynamic-shape model's follow its inputs)."""
        if self.output_shapes is not None:
            return self.output_shapes[index]
        attr = rk.rknn_tensor_attr(index=index)
        self.query(rk.RKNN_QUERY_CURRENT_OUTPUT_ATTR, attr)
        return list(attr.dims[: attr.n_dims])

    def close(self) -> None:
        """rknn_destroy (once; later calls do nothing)."""
        if self.ctx.value:
            rk.rknn_destroy(self.ctx)
            self.ctx.value = 0


class ZeroCopyIO:
    """One set of zero-copy buffers of a Client (rknn_create_mem + rknn_set_io_mem for every
    input and output), the way an application drives a runtime without rknn_inputs_set:
    inputs in the caller's types and the input attributes' formats (NHWC rows padded to the
    attribute's w_stride), outputs float32 in their attributes' layouts."""

    def __init__(self, client: Client, arrays: Sequence[np.ndarray], types: Sequence[int]
                 ) -> None:  # fmt: skip
        self.client, self.mems = client, []
        self._inputs: list[tuple[ctypes.c_void_p, rk.rknn_tensor_attr]] = []
        self._outputs: list[tuple[ctypes.c_void_p, list[int]]] = []
        try:
            for i, (x, kind) in enumerate(zip(arrays, types)):
                attr = client.attr(rk.RKNN_QUERY_INPUT_ATTR, i)
                attr.type = kind
                self._inputs.append((self._bind(attr, self._padded(x, attr).nbytes), attr))
            for i in range(len(client.outputs)):
                attr = client.attr(rk.RKNN_QUERY_OUTPUT_ATTR, i)
                attr.type = rk.RKNN_TENSOR_FLOAT32
                mem = self._bind(attr, attr.n_elems * 4)
                self._outputs.append((mem, list(attr.dims[: attr.n_dims])))
        except ClientError:
            self.close()
            raise

    def _bind(self, attr: rk.rknn_tensor_attr, size: int) -> ctypes.c_void_p:
        mem = rk.rknn_create_mem(self.client.ctx, size)
        if not mem:
            raise ClientError("rknn_create_mem", rk.RKNN_ERR_MALLOC_FAIL)
        self.mems.append(mem)
        check("rknn_set_io_mem", rk.rknn_set_io_mem(self.client.ctx, mem, attr))
        return mem

    @staticmethod
    def _padded(x: np.ndarray, attr: rk.rknn_tensor_attr) -> np.ndarray:
        """`x` with its NHWC rows padded to the attribute's w_stride (zeros)."""
        if attr.fmt == rk.RKNN_TENSOR_NHWC and x.ndim == 4 and attr.w_stride > x.shape[2]:
            pad = [(0, 0), (0, 0), (0, attr.w_stride - x.shape[2]), (0, 0)]
            return np.ascontiguousarray(np.pad(x, pad))
        return np.ascontiguousarray(x)

    def write(self, arrays: Sequence[np.ndarray]) -> None:
        """Copy the inputs into their buffers and flush them for the NPU."""
        for (mem, attr), x in zip(self._inputs, arrays):
            data = self._padded(x, attr)
            ctypes.memmove(mem.contents.virt_addr, data.ctypes.data, data.nbytes)
            check("rknn_mem_sync", rk.rknn_mem_sync(self.client.ctx, mem,
                                                   rk.RKNN_MEMORY_SYNC_TO_DEVICE))  # fmt: skip

    def read(self) -> list[np.ndarray]:
        """The outputs of the last run, float32 copies."""
        results = []
        for mem, dims in self._outputs:
            check("rknn_mem_sync", rk.rknn_mem_sync(self.client.ctx, mem,
                                                   rk.RKNN_MEMORY_SYNC_FROM_DEVICE))  # fmt: skip
            count = int(np.prod(dims))
            raw = (ctypes.c_char * (4 * count)).from_address(mem.contents.virt_addr)
            results.append(np.frombuffer(raw, np.float32).reshape(dims).copy())
        return results

    def close(self) -> None:
        """rknn_destroy_mem of every buffer (once)."""
        for mem in self.mems:
            rk.rknn_destroy_mem(self.client.ctx, mem)
        self.mems = []
