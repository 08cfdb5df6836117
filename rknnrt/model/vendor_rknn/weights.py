"""Unpacking the NPU-packed convolution weights of a vendor file.

A packed weight's native shape is one or more 6-tuples [OC1, IC1, KH, KW, OC2, IC2], each a
tile stored as OC1 -> IC1 -> KH -> KW -> OC2 -> IC2 (IC2 fastest). Consecutive tiles that
together cover the input channels form one block of OC1*OC2 output channels (they share OC1 and
OC2); within a block the tiles interleave per OC1 step (for each o1: the first tile's
IC1..IC2 part, then the next tile's), and the blocks follow one another along the output
channels. Tiles of zero elements (depthwise files carry one) are placeholders. Padding
channels (beyond the real OC and IC) are dropped.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ..errors import VendorFormatError


def _tiles(native: list[int], name: str) -> list[list[int]]:
    if not native or len(native) % 6 or len(native) > 6 * 64 or min(native) < 0:
        raise VendorFormatError(
            f"vendor .rknn model: weight '{name}' has an undecodable packing {native}"
        )
    return [native[k : k + 6] for k in range(0, len(native), 6)]


def unpack(raw: memoryview, dtype: str, native: list[int], oc: int, ic: int, kh: int, kw: int,
           name: str) -> np.ndarray:  # fmt: skip
    """The [oc, ic, kh, kw] weights of a packed constant (`ic` is 1 for depthwise)."""
    tiles = [t for t in _tiles(native, name) if prod(t)]
    data = np.frombuffer(raw, np.dtype(dtype), len(raw) // np.dtype(dtype).itemsize)
    if min(oc, ic, kh, kw) <= 0 or oc * ic * kh * kw > data.size:
        raise VendorFormatError(
            f"vendor .rknn model: weight '{name}' of shape {[oc, ic, kh, kw]} exceeds its "
            f"{data.size} stored values"
        )
    out = np.zeros((oc, ic, kh, kw), data.dtype)
    at = oc_off = 0
    for row in _output_blocks(tiles, ic, native, name):
        oc1, oc2 = row[0][0], row[0][4]
        count = sum(prod(t) for t in row)
        if any((t[2], t[3]) != (kh, kw) for t in row) or at + count > data.size or oc_off >= oc:
            raise VendorFormatError(
                f"vendor .rknn model: weight '{name}' packing {native} does not fit its "
                f"{[oc, ic, kh, kw]} shape or its {data.size} stored values"
            )
        # per OC1 step, every tile of the block in turn (the input-channel parts interleave)
        steps = data[at : at + count].reshape(oc1, -1)
        part = ic_off = 0
        for _, ic1, _, _, _, ic2 in row:
            size = ic1 * kh * kw * oc2 * ic2
            block = steps[:, part : part + size].reshape(oc1, ic1, kh, kw, oc2, ic2)
            block = block.transpose(0, 4, 1, 5, 2, 3).reshape(oc1 * oc2, ic1 * ic2, kh, kw)
            n_oc, n_ic = min(oc1 * oc2, oc - oc_off), min(ic1 * ic2, ic - ic_off)
            if n_ic > 0:
                out[oc_off : oc_off + n_oc, ic_off : ic_off + n_ic] = block[:n_oc, :n_ic]
            part += size
            ic_off += ic1 * ic2
        at += count
        oc_off += oc1 * oc2
    if oc_off < oc:
        raise VendorFormatError(
            f"vendor .rknn model: weight '{name}' packing {native} covers {oc_off} of {oc} channels"
        )
    return out


def _output_blocks(tiles: list[list[int]], ic: int, native: list[int],
                   name: str) -> list[list[list[int]]]:  # fmt: skip
    """Consecutive tiles covering all input channels of one block of output channels; they
    share OC1 and OC2 (a weight of more than one tile per block was seen with ic 48 = 32 + 16)."""
    blocks: list[list[list[int]]] = []
    row: list[list[int]] = []
    covered = 0
    for tile in tiles:
        if row and (tile[0], tile[4]) != (row[0][0], row[0][4]):
            raise VendorFormatError(
                f"vendor .rknn model: weight '{name}' packing {native} mixes output tilings"
            )
        row.append(tile)
        covered += tile[1] * tile[5]
        if covered >= ic:
            blocks.append(row)
            row, covered = [], 0
    if row:
        blocks.append(row)  # an incomplete last block: the channel check below refuses it
    return blocks


def unpack_kh_oc_kw_ic4(
    raw: memoryview, native: list[int], oc: int, ic: int, kh: int, kw: int, name: str
) -> np.ndarray:
    """rk3576 int8 convolutions with at most 4 input channels (native [OCB, 1, KH, KW, OCI,
    4]: OCB blocks of OCI output channels, the input channels padded to 4). The blocks follow
    one another, each in one of two layouts, told apart by the buffer size:
    [KH][KW][OCI][IC] in exactly OCB*KH*KW*OCI*4 bytes, and [KH][OCI][KW -> a multiple of
    4][IC] in at least that many (more follows: zeros for 3x3, for a 7x7 stem a second part of
    the same size that the weights do not need). Where the input has 3 channels the fourth
    slot holds the channel's weight zero point, which the bias blob also holds (not read
    here). Inferred from toolkit 2.5.0 builds (probes of 16 to 128 output channels)."""
    data = np.frombuffer(raw, np.int8)
    if min(oc, ic, kh, kw) <= 0 or oc * ic * kh * kw > data.size or ic > 4:
        raise VendorFormatError(f"vendor .rknn model: weight '{name}' exceeds its stored values")
    blocks, per_block = (native[0], native[4]) if len(native) == 6 else (0, 0)
    kw_pad = -(-kw // 4) * 4
    if blocks <= 0 or per_block <= 0 or blocks * per_block < oc:
        raise VendorFormatError(
            f"vendor .rknn model: weight '{name}' packing {native} (rk3576 int8) is not decoded"
        )
    if data.size == blocks * kh * kw * per_block * 4:
        block = data.reshape(blocks, kh, kw, per_block, 4).transpose(0, 3, 4, 1, 2)
    elif data.size >= blocks * kh * per_block * kw_pad * 4:
        block = data[: blocks * kh * per_block * kw_pad * 4].reshape(
            blocks, kh, per_block, kw_pad, 4).transpose(0, 2, 4, 1, 3)  # fmt: skip
    else:
        raise VendorFormatError(
            f"vendor .rknn model: weight '{name}' packing {native} (rk3576 int8) is not decoded"
        )
    block = block.reshape(blocks * per_block, 4, kh, block.shape[-1])  # oc, ic, kh, kw
    return np.ascontiguousarray(block[:oc, :ic, :, :kw])


def unpack_depthwise_pairs(
    raw: memoryview, native: list[int], channels: int, kh: int, kw: int, name: str
) -> tuple[np.ndarray, np.ndarray]:
    """rk3576 (and rk3562) int8 depthwise weights: per kernel position, the channels (padded
    to the native IC2) in 4-byte groups [w(2k), w(2k+1), -zw(2k), -zw(2k+1)] (-zw = 128 wraps
    to -128).
    Wide depthwise weights are split into tiles of 64 channels (native shape
    [1, 1, KH, KW, 1, 64, ..., 1, 1, KH, KW, 1, rest]) stored one after the other, each so.
    Returns the weights [channels, 1, kh, kw] and the weight zero points [channels]."""
    data = np.frombuffer(raw, np.int8)
    # one part per tile and IC1 step (rk3562 keeps 96 channels as IC1 3 x IC2 32)
    sizes = [t[5] for t in _tiles(native, name) if prod(t) for _ in range(t[1])] if native else []
    if not sizes or sum(sizes) < channels or any(c % 2 for c in sizes) or \
            data.size != kh * kw * sum(sizes) * 2:  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: rk3576 int8 depthwise weight '{name}' packing {native} "
            "is not decoded"
        )
    qs, zws, at = [], [], 0
    for c_pad in sizes:
        groups = data[at : at + kh * kw * c_pad * 2].reshape(kh, kw, c_pad // 2, 4)
        qs.append(groups[..., :2].reshape(kh, kw, c_pad).transpose(2, 0, 1))
        zws.append(groups[0, 0, :, 2:].reshape(c_pad))
        at += kh * kw * c_pad * 2
    q = np.concatenate(qs)[:channels, None]
    minus_zw = np.concatenate(zws)[:channels].astype(np.float64)
    minus_zw[minus_zw == -128] = 128  # zw is in [-128, 127]
    return np.ascontiguousarray(q), -minus_zw
