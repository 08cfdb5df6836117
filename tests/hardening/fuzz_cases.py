"""Deterministic mutations of model files for the fuzz test: case `index` of `seed` is always
the same bytes, so a failing case can be replayed alone (`mutate(models, seed, index)`).

A mutation is `exact` when it leaves the checksums as they are: a file that the runtime still
accepts must then compute exactly what the original computes. Mutations that write the
checksums again ("resealed") reach the rules behind them; such a file may legitimately compute
something else, so only crashes, hangs, escaped exceptions and stdout count for them.
"""

from __future__ import annotations

import functools
import json
import random
import struct
import zlib

_FIELDS = {  # header field -> (offset, struct format)
    "version": (8, "<I"), "header_size": (12, "<I"), "meta_off": (16, "<Q"),
    "meta_size": (24, "<I"), "meta_crc": (28, "<I"), "graph_off": (32, "<Q"),
    "graph_size": (40, "<I"), "graph_crc": (44, "<I"), "weights_off": (48, "<Q"),
    "weights_size": (56, "<Q"), "weights_crc": (64, "<I"),
}  # fmt: skip
KINDS = ("bit_flips", "byte_set", "truncate", "header_field", "header_field_resealed",
         "overlap_resealed", "metadata_resealed", "graph_resealed", "append",
         "resource_bomb")  # fmt: skip
# vendor .rknn files: structure-aware edits of the FlatBuffer fields the reader reads, plus the
# blind ones. They carry no checksum over their weights, so no vendor case is `exact`.
VENDOR_KINDS = ("vendor_field", "vendor_field", "vendor_field", "bit_flips", "byte_set",
                "truncate", "append")  # fmt: skip
_FIELD_VALUES = (0, 1, 2, 3, 4, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000000)


@functools.lru_cache(maxsize=64)
def vendor_fields(blob: bytes) -> tuple[tuple[int, int], ...]:
    """(file offset, width) of every FlatBuffer scalar, offset, vtable entry and vector length
    the vendor reader reads while it parses `blob`, found by recording its reads."""
    from rknnrt.model.vendor_rknn import fileformat, flatbuf, mini_format

    seen: set[tuple[int, int]] = set()

    def record(fmt: str, offset: int) -> None:
        # a run of items ('<12H': a whole vtable) is recorded item by item, the first 64
        item = struct.calcsize(fmt[0] + fmt[-1])
        count = struct.calcsize(fmt) // item
        seen.update((offset + k * item, item) for k in range(min(count, 64)))

    class _Recorded:
        def __init__(self, inner: struct.Struct) -> None:
            self.inner, self.size = inner, inner.size

        def unpack_from(self, buf, offset: int = 0):
            record(self.inner.format, offset)
            return self.inner.unpack_from(buf, offset)

    class _Struct:
        calcsize, error = struct.calcsize, struct.error

        @staticmethod
        def Struct(fmt: str) -> _Recorded:  # noqa: N802 (the struct module's name)
            return _Recorded(struct.Struct(fmt))

        @staticmethod
        def unpack_from(fmt: str, buf, offset: int = 0):
            record(fmt, offset)
            return struct.unpack_from(fmt, buf, offset)

    names = ("_U32", "_I32", "_VT_HEAD")
    saved = tuple(getattr(flatbuf, n) for n in names)
    saved_scalars, saved_struct = flatbuf._SCALARS, flatbuf.struct
    for n, x in zip(names, saved):
        setattr(flatbuf, n, _Recorded(x))
    flatbuf._SCALARS = {}  # refilled through _Struct.Struct: the scalars' reads recorded too
    flatbuf.struct = _Struct  # type: ignore[assignment]
    mini = mini_format.is_mini(memoryview(blob))  # rv1106's container (0x1004)
    try:
        (mini_format.parse if mini else fileformat.parse)(memoryview(blob))
    finally:
        for n, x in zip(names, saved):
            setattr(flatbuf, n, x)
        flatbuf._SCALARS, flatbuf.struct = saved_scalars, saved_struct
    # the FlatBuffer's place in the file; a mini file's section table (0x40: 7 u32) too
    base = mini_format.flatbuffer_offset(memoryview(blob)) if mini else fileformat.HEADER_SIZE
    table = [(mini_format.PAYLOAD_AT + 4 * k, 4) for k in range(7)] if mini else []
    return tuple(sorted([(base + off, width) for off, width in seen] + table))


def _mutate_vendor(rng: random.Random, blob: bytearray) -> None:
    fields = vendor_fields(bytes(blob))
    for _ in range(rng.choice([1, 1, 2, 4])):
        offset, width = rng.choice(fields)
        current = int.from_bytes(blob[offset : offset + width], "little")
        value = rng.choice([*_FIELD_VALUES, rng.randrange(1 << (8 * width)), len(blob),
                            current + rng.choice([-1, 1, 4, -4])])  # fmt: skip
        blob[offset : offset + width] = (value % (1 << (8 * width))).to_bytes(width, "little")


def _bomb(rng: random.Random, original: bytes) -> bytes:
    """One resource bomb (tests/hardening/bombs.py) of a random size: most are refused at
    init, the small ones load and run."""
    from . import bombs

    name = rng.choice(sorted(bombs.BOMBS) + ["many_tensors"])
    if name == "many_tensors":
        return bombs.many_tensors(original, count=rng.choice([2, 8, 64]),
                                  elements=rng.choice([1 << 10, 1 << 20]))  # fmt: skip
    size = {"constant_of_shape": ("elements", [16, 1 << 12, 3 << 28, 1 << 40]),
            "expand": ("copies", [1, 2, 1 << 16, 1 << 30]),
            "tile": ("repeats", [1, 3, 1 << 14, 1 << 30]),
            "loop": ("trips", [1, 10**15])}.get(name)  # fmt: skip
    if size is None:
        return bombs.BOMBS[name](original)
    return bombs.BOMBS[name](original, **{size[0]: rng.choice(size[1])})


def _field(blob: bytes | bytearray, name: str) -> int:
    offset, fmt = _FIELDS[name]
    return struct.unpack_from(fmt, blob, offset)[0]


def _set_field(blob: bytearray, name: str, value: int) -> None:
    offset, fmt = _FIELDS[name]
    struct.pack_into(fmt, blob, offset, value % (1 << (8 * struct.calcsize(fmt))))


def reseal(blob: bytearray) -> None:
    """Write the metadata, graph and header CRC-32s again (the weights' stays as it is)."""
    for what in ("meta", "graph"):
        off, size = _field(blob, f"{what}_off"), _field(blob, f"{what}_size")
        if off + size <= len(blob):
            _set_field(blob, f"{what}_crc", zlib.crc32(blob[off : off + size]))
    if len(blob) >= 128:
        struct.pack_into("<I", blob, 68, zlib.crc32(blob[72:128], zlib.crc32(blob[:68])))


def _special(rng: random.Random, blob: bytes) -> int:
    return rng.choice([0, 1, 63, 64, 128, 192, len(blob), len(blob) - 64, (1 << 31) - 1,
                       (1 << 32) - 1, (1 << 63), rng.randrange(1 << 16),
                       _field(blob, "graph_off"), _field(blob, "weights_off")])  # fmt: skip


def _mutate_json(rng: random.Random, value, depth: int = 0):
    """One random change somewhere in a JSON document."""
    if isinstance(value, dict) and value and depth < 6:
        key = rng.choice(sorted(value))
        value[key] = _mutate_json(rng, value[key], depth + 1)
        return value
    if isinstance(value, list) and value and rng.random() < 0.8 and depth < 6:
        k = rng.randrange(len(value))
        value[k] = _mutate_json(rng, value[k], depth + 1)
        return value
    return rng.choice([0, -1, 1, 255, -129, 1 << 40, -(1 << 40), 1e300, -0.0, 0.5, "", "x",
                       None, True, [], {}, [0], [1, 2], [[1]], "float32", "AFFINE"])  # fmt: skip


def mutate(models: dict[str, bytes], seed: int, index: int) -> tuple[str, str, bytes, bool]:
    """(model name, mutation kind, mutated bytes, exact) of case `index`."""
    rng = random.Random(seed * 1_000_003 + index)
    name = sorted(models)[index % len(models)]
    original = models[name]
    blob = bytearray(original)
    if original[:4] == b"RKNN":  # a vendor file
        kind = VENDOR_KINDS[rng.randrange(len(VENDOR_KINDS))]
        if kind == "vendor_field":
            _mutate_vendor(rng, blob)
        elif kind == "bit_flips":
            for _ in range(rng.choice([1, 1, 2, 3, 8])):
                blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
        elif kind == "byte_set":
            for _ in range(rng.choice([1, 4, 16])):
                blob[rng.randrange(len(blob))] = rng.choice([0, 0xFF, 0x7F, 0x80])
        elif kind == "truncate":
            blob = blob[: rng.choice([rng.randrange(len(blob)), rng.randrange(200)])]
        else:
            blob += bytes(rng.randrange(1, 200))
        return name, kind, bytes(blob), False
    kind = KINDS[rng.randrange(len(KINDS))]
    exact = True
    if kind == "resource_bomb":
        return name, kind, _bomb(rng, original), False
    if kind == "bit_flips":
        region = rng.choice(["header", "metadata", "graph", "weights", "anywhere"])
        start, size = {
            "header": (0, 128), "anywhere": (0, len(blob)),
            "metadata": (_field(blob, "meta_off"), _field(blob, "meta_size")),
            "graph": (_field(blob, "graph_off"), _field(blob, "graph_size")),
            "weights": (_field(blob, "weights_off"), _field(blob, "weights_size")),
        }[region]  # fmt: skip
        for _ in range(rng.choice([1, 1, 2, 3, 8])):
            blob[start + rng.randrange(max(size, 1))] ^= 1 << rng.randrange(8)
    elif kind == "byte_set":
        for _ in range(rng.choice([1, 4, 16])):
            blob[rng.randrange(len(blob))] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
    elif kind == "truncate":
        blob = blob[: rng.choice([rng.randrange(len(blob)), rng.randrange(200), len(blob) - 1])]
    elif kind in ("header_field", "header_field_resealed"):
        _set_field(blob, rng.choice(sorted(_FIELDS)), _special(rng, original))
        if kind.endswith("resealed"):
            reseal(blob)
            exact = False
    elif kind == "overlap_resealed":
        a, b = rng.sample(["meta", "graph", "weights"], 2)
        target = _field(blob, f"{b}_off") + rng.choice([0, 64, -64, 8])
        _set_field(blob, f"{a}_off", max(target, 0))
        reseal(blob)
        exact = False
    elif kind == "metadata_resealed":
        off, size = _field(blob, "meta_off"), _field(blob, "meta_size")
        raw = json.loads(bytes(blob[off : off + size]))
        text = json.dumps(_mutate_json(rng, raw), separators=(",", ":")).encode()
        weights = bytes(blob[_field(blob, "weights_off") :][: _field(blob, "weights_size")])
        graph = bytes(blob[_field(blob, "graph_off") :][: _field(blob, "graph_size")])
        from rknnrt.model import container

        blob = bytearray(container.write(text, graph, weights))
        exact = False
    elif kind == "graph_resealed":
        off, size = _field(blob, "graph_off"), _field(blob, "graph_size")
        for _ in range(rng.choice([1, 2, 4])):
            blob[off + rng.randrange(size)] = rng.randrange(256)
        reseal(blob)
        exact = False
    else:  # append: bytes after the last section change nothing
        blob += bytes(rng.randrange(1, 200))
    return name, kind, bytes(blob), exact
