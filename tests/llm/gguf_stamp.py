"""A copy of a GGUF file with one more string in its metadata (e.g. `tokenizer.chat_template`),
for testing what a model's own template does with a model whose file has none.

The GGUF layout (v2/v3): magic, version, tensor count, metadata count; the metadata key/value
pairs; the tensor infos; padding to `general.alignment` (32 by default); the tensor data, whose
offsets are relative to its start, so the data is copied as it is after new padding.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY, _ALIGNMENT = 8, 9, 32


def _string(buf: bytes, at: int) -> tuple[bytes, int]:
    (n,) = struct.unpack_from("<Q", buf, at)
    return buf[at + 8 : at + 8 + n], at + 8 + n


def _skip_value(buf: bytes, kind: int, at: int) -> int:
    if kind in _SCALARS:
        return at + _SCALARS[kind]
    if kind == _STRING:
        return _string(buf, at)[1]
    if kind == _ARRAY:
        inner, count = struct.unpack_from("<IQ", buf, at)
        at += 12
        if inner in _SCALARS:
            return at + count * _SCALARS[inner]
        for _ in range(count):
            at = _skip_value(buf, inner, at)
        return at
    raise ValueError(f"unknown GGUF value type {kind}")


def _header_end(path: Path) -> tuple[bytes, int, int, int]:
    """The header bytes (up to the end of the tensor infos), where the metadata ends, the
    alignment, and where the tensor data starts in the file."""
    size = 1 << 20
    while True:
        with open(path, "rb") as f:
            buf = f.read(size)
        try:
            return _parse(buf)
        except struct.error:
            size *= 4  # the metadata (a vocabulary) is longer than what was read


def _parse(buf: bytes) -> tuple[bytes, int, int, int]:
    if buf[:4] != b"GGUF":
        raise ValueError("not a GGUF file")
    n_tensors, n_kv = struct.unpack_from("<QQ", buf, 8)
    at, alignment = 24, _ALIGNMENT
    for _ in range(n_kv):
        key, at = _string(buf, at)
        (kind,) = struct.unpack_from("<I", buf, at)
        if key == b"general.alignment":
            (alignment,) = struct.unpack_from("<I", buf, at + 4)
        at = _skip_value(buf, kind, at + 4)
    kv_end = at
    for _ in range(n_tensors):
        _, at = _string(buf, at)
        (n_dims,) = struct.unpack_from("<I", buf, at)
        at += 4 + 8 * n_dims + 4 + 8
    if at > len(buf):
        raise struct.error("truncated")
    data = (at + alignment - 1) // alignment * alignment
    return buf[:at], kv_end, alignment, data


def with_string(src: Path, dst: Path, key: str, value: str) -> Path:
    """Write `src` to `dst` with metadata `key` set to the string `value` (added: `src` must
    not have it already)."""
    header, kv_end, alignment, data_at = _header_end(src)
    n_kv = struct.unpack_from("<Q", header, 16)[0]
    raw_key, raw_value = key.encode(), value.encode()
    entry = (struct.pack("<Q", len(raw_key)) + raw_key + struct.pack("<I", _STRING)
             + struct.pack("<Q", len(raw_value)) + raw_value)
    head = header[:16] + struct.pack("<Q", n_kv + 1) + header[24:kv_end] + entry + header[kv_end:]
    pad = (-len(head)) % alignment
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        fout.write(head + b"\0" * pad)
        fin.seek(data_at)
        shutil.copyfileobj(fin, fout, 1 << 24)
    return dst
