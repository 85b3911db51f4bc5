"""Tensor records and the two parameter-file layouts of Paddle's legacy format.

One *record* (all integers little-endian; see PADDLE_FORMAT_FACTS.md (a)):

    uint32  version               0
    uint64  lod level count       L
    L x   { uint64 byte length n, then n/8 uint64 offsets }
    uint32  tensor version        0
    int32   TensorDesc byte size  s
    s bytes VarType.TensorDesc    data_type + dims (repeated int64, unpacked)
    data    prod(dims) x element size bytes, C order, little-endian

Layouts:
  * combined (`.pdiparams`): records of the persistable vars concatenated in ascending
    byte-wise order of their names, nothing else (no header, names, count or trailer).
    `save_combined` / `load_combined` / `read_all_records`.
  * per variable (`save_vars` without `filename`): one record in a file of its own.
    `save_tensor` / `load_tensor`.

bfloat16 has no numpy dtype: its values travel as their uint16 bit patterns. Pass
`dtype_code=pb.VarType.BF16` to write a uint16 array as BF16; reading a BF16 record yields
a uint16 array (`read_record` / `read_all_records` also report the stored dtype code).

Every problem with a file's content, or with a value that cannot be stored, raises
`TensorFileError` naming the file, the record/variable and what was expected vs found.
"""
from __future__ import annotations

import io
import os
import stat
import struct
from typing import BinaryIO, Iterable, Mapping, NamedTuple, Sequence

import numpy as np
from google.protobuf.message import DecodeError

from keel.program import dtypes
from keel.program.io.atomic import atomic_open
from keel.program.errors import KeelError
from keel.proto import pb

__all__ = [
    "TensorFileError",
    "TensorRecord",
    "combined_order",
    "write_tensor",
    "read_tensor",
    "read_record",
    "save_combined",
    "load_combined",
    "read_all_records",
    "save_tensor",
    "load_tensor",
]

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")
_U64_MAX = (1 << 64) - 1
_CHUNK = 1 << 24  # read size when the stream's length is unknown (avoid trusting a huge length)


class TensorFileError(KeelError, ValueError):
    """A tensor file (or a value to be written to one) is missing, malformed or does not match."""


class TensorRecord(NamedTuple):
    """One decoded record: the array (native byte order; BF16 as uint16 bits), its LoD and the
    VarType dtype number stored in the file."""
    array: np.ndarray
    lod: list[list[int]]
    dtype_code: int


def combined_order(names: Iterable[str]) -> list[str]:
    """Names in the order of a combined params file: ascending byte-wise (strcmp) order of UTF-8."""
    try:
        return sorted(names, key=lambda n: n.encode("utf-8"))
    except (AttributeError, UnicodeEncodeError) as e:
        raise TensorFileError(f"variable names must be encodable str: {e}") from None


# --------------------------------------------------------------------------------------------
# Reading


def _label(index: int | None, name: str | None) -> str:
    if index is None:
        return f"variable {name}" if name is not None else "record"
    return f"record {index} ({name})" if name is not None else f"record {index}"


def _stream_size(f) -> int | None:
    """Total length of a seekable stream (None if it cannot be known cheaply)."""
    try:
        st = os.fstat(f.fileno())
        if stat.S_ISREG(st.st_mode):  # pipes and devices report no meaningful size
            return st.st_size
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        pass
    try:
        if f.seekable():
            pos = f.tell()
            end = f.seek(0, io.SEEK_END)
            f.seek(pos)
            return end
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        pass
    return None


class _Reader:
    """Reads exact byte counts from a stream, turning short reads into TensorFileError.

    Knows the stream length when it can, so a corrupt length field is reported before
    anything is allocated for it."""

    def __init__(self, f: BinaryIO, source: str):
        self.f = f
        self.source = source
        size = _stream_size(f)
        try:
            self.pos = f.tell() if size is not None else 0
        except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
            size, self.pos = None, 0
        self.size = size

    def remaining(self) -> int | None:
        return None if self.size is None else max(self.size - self.pos, 0)

    def fail(self, label: str, detail: str) -> TensorFileError:
        return TensorFileError(f"{self.source}: {label}: {detail}")

    def at_eof(self) -> bool:
        """True if nothing is left to read. Consumes nothing."""
        rem = self.remaining()
        if rem is not None:
            return rem == 0
        peek = getattr(self.f, "peek", None)  # unknown length: buffered streams can peek
        if peek is not None:
            try:
                return len(peek(1)) == 0
            except (OSError, ValueError):
                return False
        return False  # cannot tell without consuming: the next read reports a clean error

    def read(self, n: int, label: str, what: str) -> bytearray:
        """Exactly `n` bytes (a fresh, writable bytearray) or TensorFileError."""
        rem = self.remaining()
        if rem is not None and n > rem:
            raise self.fail(label, f"file ends after {rem} of {n} {what} bytes")
        if rem is not None or n <= _CHUNK:
            buf = bytearray(n)
            got = self._fill(buf, label)
        else:  # unknown length and a large request: grow only as data actually arrives
            buf = bytearray()
            while len(buf) < n:
                part = self._call(self.f.read, min(_CHUNK, n - len(buf)), label)
                if not part:
                    break
                buf += part
            got = len(buf)
        self.pos += got
        if got < n:
            raise self.fail(label, f"file ends after {got} of {n} {what} bytes")
        return buf

    def _call(self, fn, arg, label: str):
        try:
            return fn(arg)
        except OSError as e:
            raise self.fail(label, f"read error: {e}") from None

    def _fill(self, buf: bytearray, label: str) -> int:
        view, got, n = memoryview(buf), 0, len(buf)
        readinto = getattr(self.f, "readinto", None)
        while got < n:
            if readinto is not None:
                k = self._call(readinto, view[got:], label)
            else:
                part = self._call(self.f.read, n - got, label)
                k = len(part)
                view[got:got + k] = part
            if not k:
                break
            got += k
        return got

    def u32(self, label: str, what: str) -> int:
        return _U32.unpack(self.read(4, label, what))[0]

    def u64(self, label: str, what: str) -> int:
        return _U64.unpack(self.read(8, label, what))[0]

    def i32(self, label: str, what: str) -> int:
        return _I32.unpack(self.read(4, label, what))[0]


def _read_header(r: _Reader, label: str) -> tuple[list[list[int]], int, list[int]]:
    """Everything up to the data: returns (lod, dtype code, dims)."""
    version = r.u32(label, "record version")
    if version != 0:
        raise r.fail(label, f"unsupported tensor record version {version} (expected 0)")
    levels = r.u64(label, "LoD level count")
    rem = r.remaining()
    if rem is not None and levels * 8 > rem:
        raise r.fail(label, f"LoD level count {levels} is impossible with {rem} bytes left in the file")
    lod = []
    for level in range(levels):
        nbytes = r.u64(label, f"LoD level {level} length")
        if nbytes % 8:
            raise r.fail(label, f"LoD level {level} byte length {nbytes} is not a multiple of 8")
        raw = r.read(nbytes, label, f"LoD level {level}")
        lod.append([int(v) for v in np.frombuffer(raw, dtype="<u8")])
    tensor_version = r.u32(label, "tensor version")
    if tensor_version != 0:
        raise r.fail(label, f"unsupported tensor version {tensor_version} (expected 0)")
    desc_size = r.i32(label, "TensorDesc size")
    if desc_size < 0:
        raise r.fail(label, f"negative TensorDesc size {desc_size}")
    raw = bytes(r.read(desc_size, label, "TensorDesc"))
    try:
        desc = pb.VarType.TensorDesc.FromString(raw)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise r.fail(label, f"corrupt TensorDesc ({desc_size} bytes {raw[:32].hex()}): {e}") from None
    if not desc.HasField("data_type"):
        raise r.fail(label, f"TensorDesc has no (known) data_type (bytes {raw[:32].hex()})")
    code = int(desc.data_type)
    try:
        dtypes.to_numpy(code)
    except TypeError:
        raise r.fail(label, f"unsupported data type {dtypes.name(code)} in TensorDesc") from None
    dims = [int(d) for d in desc.dims]
    if any(d < 0 for d in dims):
        raise r.fail(label, f"negative dimension in stored dims {dims}")
    return lod, code, dims


def _read_data(r: _Reader, label: str, code: int, dims: list[int]) -> np.ndarray:
    native = dtypes.to_numpy(code)
    count = 1
    for d in dims:
        count *= d
    nbytes = count * native.itemsize
    raw = r.read(nbytes, label, "data")
    if nbytes == 0:
        return np.empty(dims, dtype=native)
    # The bytearray is ours, so the array is writable without another copy.
    arr = np.frombuffer(raw, dtype=native.newbyteorder("<")).reshape(dims)
    if not arr.dtype.isnative:  # big-endian host
        arr = arr.astype(native)
    return arr


def _read(r: _Reader, label: str) -> TensorRecord:
    lod, code, dims = _read_header(r, label)
    return TensorRecord(_read_data(r, label, code, dims), lod, code)


def read_record(f: BinaryIO, *, source: str = "<stream>", name: str | None = None,
                index: int | None = None) -> TensorRecord:
    """Read one record from a binary stream at its current position."""
    return _read(_Reader(f, source), _label(index, name))


def read_tensor(f: BinaryIO, *, source: str = "<stream>", name: str | None = None,
                index: int | None = None) -> tuple[np.ndarray, list[list[int]]]:
    """Read one record; returns (array, lod). `source`/`name`/`index` only label errors."""
    rec = read_record(f, source=source, name=name, index=index)
    return rec.array, rec.lod


# --------------------------------------------------------------------------------------------
# Writing


def _encode_header(array, lod, dtype_code, where: str) -> tuple[bytes, np.ndarray]:
    """Validate and convert; returns (header bytes, little-endian C-contiguous array)."""
    arr = np.asarray(array)
    native = arr.dtype.newbyteorder("=") if arr.dtype.byteorder in "<>" else arr.dtype
    try:
        code = dtypes.to_code(native) if dtype_code is None else dtypes.to_code(dtype_code)
        expect = dtypes.to_numpy(code)
    except TypeError as e:
        raise TensorFileError(f"{where}: cannot store an array of dtype {arr.dtype}: {e}") from None
    if native != expect:
        raise TensorFileError(f"{where}: dtype_code {dtypes.name(code)} needs a {expect} array, "
                              f"got {arr.dtype}")
    data = arr.astype(expect.newbyteorder("<"), order="C", copy=False)

    parts = [_U32.pack(0)]
    levels = [] if lod is None else list(lod)
    parts.append(_U64.pack(len(levels)))
    for i, level in enumerate(levels):
        try:
            offsets = [int(v) for v in level]
        except (TypeError, ValueError):
            raise TensorFileError(f"{where}: LoD level {i} is not a sequence of integers: {level!r}") from None
        if any(v < 0 or v > _U64_MAX for v in offsets):
            raise TensorFileError(f"{where}: LoD level {i} has offsets outside uint64: {offsets}")
        parts.append(_U64.pack(8 * len(offsets)))
        parts.append(struct.pack(f"<{len(offsets)}Q", *offsets))
    desc = pb.VarType.TensorDesc(data_type=code, dims=list(data.shape)).SerializeToString()
    parts.append(_U32.pack(0))
    parts.append(_I32.pack(len(desc)))
    parts.append(desc)
    return b"".join(parts), data


def write_tensor(f: BinaryIO, array, lod: Sequence[Sequence[int]] | None = None, *,
                 dtype_code: int | str | None = None, name: str | None = None) -> int:
    """Write one record for `array` to a binary stream; returns the number of bytes written.

    `dtype_code` overrides the dtype stored (it must map to the array's numpy dtype, e.g. BF16
    for a uint16 array). Any byte order and memory layout is accepted. `name` labels errors."""
    header, data = _encode_header(array, lod, dtype_code, name if name is not None else "<tensor>")
    f.write(header)
    # A flat uint8 view: no copy of the (possibly large) data, and a plain byte buffer.
    f.write(memoryview(data.reshape(-1).view(np.uint8)))
    return len(header) + data.nbytes


# --------------------------------------------------------------------------------------------
# Files


def _open_for_read(path) -> tuple[BinaryIO, str]:
    source = os.fspath(path)
    try:
        return open(source, "rb"), source
    except FileNotFoundError:
        raise TensorFileError(f"{source}: no such file") from None
    except OSError as e:
        raise TensorFileError(f"{source}: cannot open: {e.strerror or e}") from None


def save_combined(path, tensors: Mapping[str, np.ndarray], *,
                  dtype_codes: Mapping[str, int | str] | None = None) -> list[str]:
    """Write a combined params file: one record per entry, names in byte-wise order, atomically.

    `dtype_codes` optionally overrides the stored dtype per name (e.g. BF16 for uint16 arrays).
    An empty mapping writes an empty file (Paddle itself writes no file in that case: a caller
    that wants to mimic it should not call this). Returns the names in the order written."""
    source = os.fspath(path)
    try:
        names = combined_order(tensors.keys())
    except TensorFileError as e:
        raise TensorFileError(f"{source}: {e}") from None
    codes = dict(dtype_codes or {})
    unknown = sorted(set(codes) - set(names))
    if unknown:
        raise TensorFileError(f"{source}: dtype_codes names variables that are not saved: {unknown}")
    with atomic_open(source) as f:
        for i, n in enumerate(names):
            write_tensor(f, tensors[n], dtype_code=codes.get(n), name=f"{source}: {_label(i, n)}")
    return names


def _check_shape(spec_shape, dims) -> bool:
    if spec_shape is None:
        return True
    spec = [int(d) for d in spec_shape]
    return len(spec) == len(dims) and all(s == -1 or s == d for s, d in zip(spec, dims))


def load_combined(path, specs: Sequence[tuple[str, int | str | None, Sequence[int] | None]]
                  ) -> dict[str, np.ndarray]:
    """Read a combined params file given the persistable vars `(name, dtype_code, shape)` of the
    program (any order; -1 in a shape matches any size, None skips that check).

    Records are matched to the names in byte-wise order; each record's dtype and dims are checked
    against its spec and the file must end right after the last record. Returns {name: array}
    in file order. With no specs, a missing file is accepted (Paddle writes none)."""
    source = os.fspath(path)
    table = {}
    for i, spec in enumerate(specs):
        try:
            n, code, shape = spec
        except (TypeError, ValueError):
            raise TensorFileError(f"{source}: spec {i} is not (name, dtype_code, shape): {spec!r}") from None
        if not isinstance(n, str):
            raise TensorFileError(f"{source}: spec {i} has a non-str name {n!r}")
        if n in table:
            raise TensorFileError(f"{source}: variable {n} is listed twice in the specs")
        try:
            code = None if code is None else dtypes.to_code(code)
        except TypeError as e:
            raise TensorFileError(f"{source}: variable {n}: bad dtype in spec: {e}") from None
        table[n] = (code, None if shape is None else tuple(shape))
    try:
        names = combined_order(table)
    except TensorFileError as e:
        raise TensorFileError(f"{source}: {e}") from None
    if not names and not os.path.exists(source):
        return {}
    f, source = _open_for_read(source)
    out = {}
    with f:
        r = _Reader(f, source)
        for i, n in enumerate(names):
            label = _label(i, n)
            if r.at_eof():
                raise r.fail(label, f"file ends before this record: expected {len(names)} records "
                                    f"(one per persistable variable), found {i}")
            lod, code, dims = _read_header(r, label)
            want_code, want_shape = table[n]
            if want_code is not None and code != want_code:
                raise r.fail(label, f"dtype mismatch: the program expects {dtypes.name(want_code)}, "
                                    f"the file has {dtypes.name(code)}")
            if not _check_shape(want_shape, dims):
                raise r.fail(label, f"shape mismatch: the program expects {list(want_shape)}, "
                                    f"the file has {dims}")
            out[n] = _read_data(r, label, code, dims)
        rem = r.remaining()
        if rem is None:
            rem = len(f.read())
        if rem:
            after = f"after {_label(len(names) - 1, names[-1])}, " if names else ""
            raise TensorFileError(f"{source}: {rem} trailing bytes {after}where the file should end: "
                                  f"expected {len(names)} records (one per persistable variable); "
                                  f"the file holds more tensors or is corrupt")
    return out


def read_all_records(path) -> list[TensorRecord]:
    """Read every record of a file until EOF, without specs (debugging and tools)."""
    f, source = _open_for_read(path)
    records = []
    with f:
        r = _Reader(f, source)
        while not r.at_eof():
            records.append(_read(r, _label(len(records), None)))
    return records


def save_tensor(path, array, lod: Sequence[Sequence[int]] | None = None, *,
                dtype_code: int | str | None = None) -> None:
    """Write one record to a file of its own (per-variable layout), atomically."""
    source = os.fspath(path)
    with atomic_open(source) as f:
        write_tensor(f, array, lod, dtype_code=dtype_code, name=source)


def load_tensor(path, *, name: str | None = None, dtype_code: int | str | None = None,
                shape: Sequence[int] | None = None) -> np.ndarray:
    """Read a per-variable file: exactly one record. Optionally check dtype/shape like
    `load_combined` does (`name` labels errors)."""
    f, source = _open_for_read(path)
    label = _label(None, name)
    with f:
        r = _Reader(f, source)
        if r.at_eof():
            raise r.fail(label, "the file is empty (expected one tensor record)")
        _, code, dims = _read_header(r, label)
        if dtype_code is not None:
            try:
                want = dtypes.to_code(dtype_code)
            except TypeError as e:
                raise r.fail(label, f"bad expected dtype: {e}") from None
            if code != want:
                raise r.fail(label, f"dtype mismatch: expected {dtypes.name(want)}, "
                                    f"the file has {dtypes.name(code)}")
        if not _check_shape(shape, dims):
            raise r.fail(label, f"shape mismatch: expected {list(shape)}, the file has {dims}")
        arr = _read_data(r, label, code, dims)
        rem = r.remaining()
        if rem is None:
            rem = len(f.read())
        if rem:
            raise r.fail(label, f"{rem} trailing bytes after the tensor record")
    return arr
