"""Tensor record codec and the combined / per-variable parameter file layouts
(PADDLE_FORMAT_FACTS.md (a), (b))."""
from __future__ import annotations

import io
import os
import struct

import numpy as np
import pytest

from keel.program import dtypes
from keel.program.io import atomic
from keel.program.io.atomic import atomic_open, atomic_write
from keel.program.io.tensor_file import (
    TensorFileError,
    combined_order,
    load_combined,
    load_tensor,
    read_all_records,
    read_record,
    read_tensor,
    save_combined,
    save_tensor,
    write_tensor,
)
from keel.proto import pb

T = pb.VarType

# Every dtype of the Paddle element-size table (facts (a)) plus the others in program/dtypes.py.
DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64",
          "uint16", "uint32", "uint64", "complex64", "complex128"]
PADDLE_ELEM_SIZE = {T.BOOL: 1, T.INT8: 1, T.UINT8: 1, T.INT16: 2, T.FP16: 2, T.BF16: 2,
                    T.INT32: 4, T.FP32: 4, T.INT64: 8, T.FP64: 8}


def sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) > 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def encode(array, lod=None, **kw) -> bytes:
    buf = io.BytesIO()
    n = write_tensor(buf, array, lod, **kw)
    assert n == len(buf.getvalue())
    return buf.getvalue()


def decode(data: bytes):
    buf = io.BytesIO(data)
    out = read_tensor(buf, source="mem")
    assert buf.tell() == len(data), "the reader must consume exactly one record"
    return out


def record_bytes(desc_hex: str, data: bytes, *, version=0, tensor_version=0, lod_levels=b"",
                 n_levels=0, desc_size=None) -> bytes:
    desc = bytes.fromhex(desc_hex)
    size = len(desc) if desc_size is None else desc_size
    return (struct.pack("<IQ", version, n_levels) + lod_levels
            + struct.pack("<Ii", tensor_version, size) + desc + data)


# ------------------------------------------------------------------------------ record codec


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (7,), (2, 3, 4)])
def test_round_trip_every_dtype_and_shape(dtype, shape):
    a = sample(dtype, shape)
    data = encode(a)
    b, lod = decode(data)
    assert lod == []
    assert b.dtype == np.dtype(dtype) and b.shape == shape
    np.testing.assert_array_equal(a, b)
    assert b.flags.writeable and b.dtype.isnative
    b[...] = 0  # writable, and not a view of anything the caller still uses
    code = dtypes.to_code(dtype)
    desc = pb.VarType.TensorDesc.FromString(data[20:20 + struct.unpack("<i", data[16:20])[0]])
    assert desc.data_type == code and list(desc.dims) == list(shape)
    count = int(np.prod(shape, dtype=np.int64))
    assert len(data) == 20 + len(desc.SerializeToString()) + count * np.dtype(dtype).itemsize
    if code in PADDLE_ELEM_SIZE:
        assert np.dtype(dtype).itemsize == PADDLE_ELEM_SIZE[code]


def test_documented_fp32_example_bytes():
    a = np.arange(128, dtype=np.float32)
    data = encode(a)
    assert data[:25].hex() == "00000000" "0000000000000000" "00000000" "05000000" "0805108001"
    assert len(data) == 25 + 128 * 4
    assert data[25:] == a.astype("<f4").tobytes()


def test_dims_are_unpacked_one_key_per_dim():
    data = encode(np.zeros((64, 128), np.float32))
    # 0x08 05 (FP32), then 0x10 40 (64) and 0x10 8001 (128): unpacked, no 0x12 length-delimited key.
    assert data[16:20] == struct.pack("<i", 7)
    assert data[20:27].hex() == "0805" "1040" "108001"


def test_zero_d_and_zero_size_layout():
    d0 = encode(np.float32(2.5))
    assert d0[16:22].hex() == "02000000" "0805"  # no dims field
    assert d0[22:] == struct.pack("<f", 2.5)
    dz = encode(np.zeros((0, 3), np.float32))
    assert dz[20:].hex() == "0805" "1000" "1003"  # dims 0, 3 and no data bytes


def test_lod_round_trip_and_layout():
    a = sample("float32", (5, 2))
    data = encode(a, [[0, 2, 5]])
    assert data[4:12] == struct.pack("<Q", 1)
    assert data[12:20].hex() == "1800000000000000"
    assert data[20:44] == struct.pack("<3Q", 0, 2, 5)
    b, lod = decode(data)
    assert lod == [[0, 2, 5]]
    np.testing.assert_array_equal(a, b)
    # two levels, one of them empty
    b, lod = decode(encode(a, [[0, 1], []]))
    assert lod == [[0, 1], []]


@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("dtype", ["int16", "int32", "int64", "float16", "float32", "float64",
                                   "complex64"])
def test_any_byte_order_is_written_little_endian(byteorder, dtype):
    a = sample(dtype, (3, 4)).astype(np.dtype(dtype).newbyteorder(byteorder))
    data = encode(a)
    assert data.endswith(a.astype(np.dtype(dtype).newbyteorder("<")).tobytes())
    b, _ = decode(data)
    assert b.dtype == np.dtype(dtype)  # native order after reading
    np.testing.assert_array_equal(a, b)


def test_non_contiguous_inputs_are_written_in_c_order():
    base = sample("float64", (6, 8))
    for view in (base.T, base[::2, 1::3], np.asfortranarray(base), base[:, ::-1]):
        b, _ = decode(encode(view))
        np.testing.assert_array_equal(b, view)
        assert b.flags.c_contiguous


def test_bfloat16_as_uint16_bits():
    bits = np.array([[0x3F80, 0xC000], [0x7F80, 0x0001]], dtype=np.uint16)
    data = encode(bits, dtype_code=T.BF16)
    assert data[20:22].hex() == "0816"  # data_type 22 = BF16
    rec = read_record(io.BytesIO(data))
    assert rec.dtype_code == T.BF16 and rec.array.dtype == np.uint16
    np.testing.assert_array_equal(rec.array, bits)
    # without the override a uint16 array is UINT16
    assert read_record(io.BytesIO(encode(bits))).dtype_code == T.UINT16
    # big-endian uint16 bits too
    b, _ = decode(encode(bits.astype(">u2"), dtype_code="bfloat16"))
    np.testing.assert_array_equal(b, bits)


def test_dtype_override_must_match_the_array():
    with pytest.raises(TensorFileError, match="bfloat16.*float32"):
        encode(np.zeros(3, np.float32), dtype_code=T.BF16, name="w")
    with pytest.raises(TensorFileError, match="w: cannot store .*object"):
        encode(np.array([object()]), name="w")
    with pytest.raises(TensorFileError, match="LoD level 0"):
        encode(np.zeros(3, np.float32), [[0, -1]], name="w")


def test_many_records_in_one_stream():
    arrays = [sample(d, s, i) for i, (d, s) in enumerate([("float32", (3,)), ("int64", ()),
                                                         ("bool", (0, 2)), ("float16", (2, 2))])]
    buf = io.BytesIO()
    for a in arrays:
        write_tensor(buf, a)
    buf.seek(0)
    for a in arrays:
        b, _ = read_tensor(buf)
        np.testing.assert_array_equal(a, b)
    assert buf.read() == b""


class _NoSeek(io.RawIOBase):
    """A pipe-like stream: no seek/tell/fileno, short reads."""

    def __init__(self, data):
        self._data, self._pos = data, 0

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), 7, len(self._data) - self._pos)
        b[:n] = self._data[self._pos:self._pos + n]
        self._pos += n
        return n


def test_unseekable_stream_with_short_reads():
    a = sample("float32", (10, 3))
    b, _ = read_tensor(_NoSeek(encode(a)))
    np.testing.assert_array_equal(a, b)
    with pytest.raises(TensorFileError, match=r"pipe: variable x: file ends after 100 of 120 data bytes"):
        read_tensor(_NoSeek(encode(a)[:-20]), source="pipe", name="x")


# ------------------------------------------------------------------------------ combined layout


def test_combined_order_is_byte_wise():
    names = ["fc_0.w_0", "fc_0.b_0", "conv2d_2.w_0", "conv2d_10.w_0", "conv2d_1.w_0", "a_upper",
             "B_upper", "_x", "Z"]
    assert combined_order(names) == ["B_upper", "Z", "_x", "a_upper", "conv2d_1.w_0",
                                     "conv2d_10.w_0", "conv2d_2.w_0", "fc_0.b_0", "fc_0.w_0"]


def test_save_combined_writes_sorted_records(tmp_path):
    path = tmp_path / "model.pdiparams"
    tensors = {"fc_0.w_0": sample("float32", (64, 128)), "fc_0.b_0": sample("float32", (128,)),
               "conv2d_2.w_0": sample("float32", (2,)), "conv2d_10.w_0": sample("float32", (10,)),
               "a_upper": sample("int64", ()), "B_upper": sample("int32", (1,))}
    order = save_combined(path, tensors)
    assert order == ["B_upper", "a_upper", "conv2d_10.w_0", "conv2d_2.w_0", "fc_0.b_0", "fc_0.w_0"]
    recs = read_all_records(path)
    assert [r.array.shape for r in recs] == [tensors[n].shape for n in order]
    for r, n in zip(recs, order):
        np.testing.assert_array_equal(r.array, tensors[n])
    # mlp-like file starts with fc_0.b_0 when only the fc vars are saved
    save_combined(path, {"fc_0.w_0": tensors["fc_0.w_0"], "fc_0.b_0": tensors["fc_0.b_0"]})
    assert path.read_bytes()[:25].hex() == "00000000" "0000000000000000" "00000000" "05000000" "0805108001"


def test_load_combined_round_trip(tmp_path):
    path = tmp_path / "p.pdiparams"
    tensors = {"w": sample("float32", (4, 3)), "b": sample("float32", (3,)),
               "step": sample("int64", ()), "mask": sample("bool", (0, 5)),
               "bf": np.array([0x3F80, 0x4000], np.uint16)}
    save_combined(path, tensors, dtype_codes={"bf": T.BF16})
    specs = [("w", T.FP32, [-1, 3]), ("b", "float32", (3,)), ("step", T.INT64, ()),
             ("mask", T.BOOL, [0, 5]), ("bf", T.BF16, [2])]
    out = load_combined(path, specs)
    assert list(out) == ["b", "bf", "mask", "step", "w"]  # file order
    for n, a in tensors.items():
        np.testing.assert_array_equal(out[n], a)
        assert out[n].dtype == a.dtype
    # None skips a check
    out = load_combined(path, [(n, None, None) for n in tensors])
    assert set(out) == set(tensors)


def test_empty_combined(tmp_path):
    assert load_combined(tmp_path / "absent.pdiparams", []) == {}  # Paddle writes no file
    path = tmp_path / "empty.pdiparams"
    assert save_combined(path, {}) == []
    assert path.read_bytes() == b""
    assert load_combined(path, []) == {}
    assert read_all_records(path) == []


def test_big_record_round_trip(tmp_path):
    path = tmp_path / "big.pdiparams"
    a = sample("float32", (1024, 1024))
    save_combined(path, {"big": a})
    np.testing.assert_array_equal(load_combined(path, [("big", T.FP32, (1024, 1024))])["big"], a)


# ------------------------------------------------------------------------------ per-variable layout


def test_save_load_tensor(tmp_path):
    for i, dtype in enumerate(DTYPES):
        path = tmp_path / f"var_{dtype}"
        a = sample(dtype, (2, 3), i)
        save_tensor(path, a)
        b = load_tensor(path)
        np.testing.assert_array_equal(a, b)
        assert path.read_bytes() == encode(a)
    path = tmp_path / "lod_var"
    save_tensor(path, sample("int64", (5, 1)), [[0, 2, 5]])
    b, lod = read_tensor(open(path, "rb"))
    assert lod == [[0, 2, 5]]
    assert load_tensor(path, name="lod_var", dtype_code="int64", shape=[-1, 1]).shape == (5, 1)


# ------------------------------------------------------------------------------ errors


def _params(tmp_path):
    """A 3-record file: a (float32 [2,3]), b (int64 [4]), c (float32 [128])."""
    path = tmp_path / "params.pdiparams"
    tensors = {"a": sample("float32", (2, 3)), "b": sample("int64", (4,)), "c": sample("float32", (128,))}
    save_combined(path, tensors)
    specs = [("a", T.FP32, (2, 3)), ("b", T.INT64, (4,)), ("c", T.FP32, (128,))]
    return path, specs, tensors


def _rec_len(a):
    return len(encode(a))


def _raises(fn, *parts):
    with pytest.raises(TensorFileError) as info:
        fn()
    msg = str(info.value)
    for p in parts:
        assert p in msg, f"{p!r} not in {msg!r}"
    return msg


def test_error_missing_file(tmp_path):
    path = tmp_path / "nope.pdiparams"
    _raises(lambda: load_combined(path, [("a", T.FP32, (1,))]), "nope.pdiparams", "no such file")
    _raises(lambda: read_all_records(path), "nope.pdiparams")
    _raises(lambda: load_tensor(tmp_path / "fc_0.w_0"), "fc_0.w_0", "no such file")
    _raises(lambda: load_combined(tmp_path, [("a", T.FP32, (1,))]), str(tmp_path))  # a directory


def test_error_truncated_data(tmp_path):
    path, specs, t = _params(tmp_path)
    raw = path.read_bytes()
    cut = _rec_len(t["a"]) + _rec_len(t["b"]) + 20 + 5 + 120  # 120 of 512 data bytes of c
    path.write_bytes(raw[:cut])
    msg = _raises(lambda: load_combined(path, specs), "params.pdiparams", "record 2 (c)",
                  "file ends after 120 of 512 data bytes")
    assert msg == f"{path}: record 2 (c): file ends after 120 of 512 data bytes"
    _raises(lambda: read_all_records(path), "params.pdiparams", "record 2",
            "file ends after 120 of 512 data bytes")


@pytest.mark.parametrize("cut, what", [(2, "record version"), (9, "LoD level count"),
                                       (14, "tensor version"), (18, "TensorDesc size"),
                                       (22, "TensorDesc")])
def test_error_truncated_header(tmp_path, cut, what):
    path, specs, t = _params(tmp_path)
    start = _rec_len(t["a"])  # cut inside record 1 (b)
    path.write_bytes(path.read_bytes()[:start + cut])
    _raises(lambda: load_combined(path, specs), "params.pdiparams", "record 1 (b)", what, "file ends after")


def test_error_fewer_records_than_specs(tmp_path):
    path, specs, _ = _params(tmp_path)
    specs = specs + [("d", T.FP32, (1,))]  # d sorts last
    _raises(lambda: load_combined(path, specs), "params.pdiparams", "record 3 (d)",
            "expected 4 records", "found 3")


def test_error_trailing_bytes(tmp_path):
    path, specs, _ = _params(tmp_path)
    _raises(lambda: load_combined(path, specs[:2]), "params.pdiparams", "trailing bytes")
    with open(path, "ab") as f:
        f.write(b"\0" * 3)
    _raises(lambda: load_combined(path, specs), "params.pdiparams", "3 trailing bytes")
    one = tmp_path / "conv2d_0.w_0"
    save_tensor(one, np.zeros(2, np.float32))
    with open(one, "ab") as f:
        f.write(b"x")
    _raises(lambda: load_tensor(one, name="conv2d_0.w_0"), "conv2d_0.w_0", "1 trailing bytes")


def test_error_bad_versions(tmp_path):
    path, specs, t = _params(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[0:4] = struct.pack("<I", 7)
    path.write_bytes(bytes(raw))
    _raises(lambda: load_combined(path, specs), "params.pdiparams", "record 0 (a)",
            "record version 7", "expected 0")
    raw[0:4] = struct.pack("<I", 0)
    raw[12:16] = struct.pack("<I", 1)
    path.write_bytes(bytes(raw))
    _raises(lambda: load_combined(path, specs), "params.pdiparams", "record 0 (a)",
            "tensor version 1", "expected 0")


@pytest.mark.parametrize("desc_hex, found", [
    ("08051080", "corrupt TensorDesc"),         # truncated varint
    ("ff", "corrupt TensorDesc"),                # bad key
    ("1005", "no (known) data_type"),            # required data_type missing
    ("0863", "no (known) data_type"),            # unknown enum value
    ("0820", "unsupported data type"),           # FP8_E4M3FN: no numpy equivalent
    ("0805" "10" "ffffffffffffffffff01", "negative dimension"),  # dims [-1]
])
def test_error_corrupt_tensor_desc(tmp_path, desc_hex, found):
    path = tmp_path / "bad.pdiparams"
    path.write_bytes(record_bytes(desc_hex, b"\0" * 16))
    _raises(lambda: load_combined(path, [("w", T.FP32, None)]), "bad.pdiparams", "record 0 (w)", found)
    _raises(lambda: read_all_records(path), "bad.pdiparams", "record 0", found)


def test_error_bad_lengths(tmp_path):
    path = tmp_path / "bad.pdiparams"
    path.write_bytes(record_bytes("0805", b"\0" * 4, desc_size=-3))
    _raises(lambda: load_combined(path, [("w", T.FP32, ())]), "bad.pdiparams", "(w)", "negative TensorDesc size")
    path.write_bytes(record_bytes("0805", b"\0" * 4, desc_size=1 << 30))
    _raises(lambda: load_combined(path, [("w", T.FP32, ())]), "bad.pdiparams", "(w)",
            f"of {1 << 30} TensorDesc bytes")
    path.write_bytes(record_bytes("0805", b"\0" * 4, n_levels=1 << 62))
    _raises(lambda: load_combined(path, [("w", T.FP32, ())]), "bad.pdiparams", "(w)", "LoD level count")
    path.write_bytes(record_bytes("0805", b"\0" * 4, n_levels=1, lod_levels=struct.pack("<Q", 12) + b"\0" * 12))
    _raises(lambda: load_combined(path, [("w", T.FP32, ())]), "bad.pdiparams", "(w)", "not a multiple of 8")
    path.write_bytes(record_bytes("0805", b"\0" * 4, n_levels=1, lod_levels=struct.pack("<Q", 1 << 40)))
    _raises(lambda: load_combined(path, [("w", T.FP32, ())]), "bad.pdiparams", "(w)", "LoD level 0")
    # huge dims: reported as truncation, nothing allocated
    path.write_bytes(record_bytes("0805" "10" "8080808080808001", b"\0" * 4))
    _raises(lambda: load_combined(path, [("w", T.FP32, None)]), "bad.pdiparams", "(w)", "data bytes")


def test_error_dtype_mismatch(tmp_path):
    path, specs, _ = _params(tmp_path)
    specs[1] = ("b", T.INT32, (4,))
    _raises(lambda: load_combined(path, specs), "params.pdiparams", "record 1 (b)",
            "int32", "int64", "dtype mismatch")
    one = tmp_path / "fc_0.b_0"
    save_tensor(one, np.zeros(3, np.float32))
    _raises(lambda: load_tensor(one, name="fc_0.b_0", dtype_code=T.FP64), "fc_0.b_0", "float64", "float32")


@pytest.mark.parametrize("shape", [(3, 2), (2,), (2, 3, 1), (), (-1,), (2, 4)])
def test_error_shape_mismatch(tmp_path, shape):
    path, specs, _ = _params(tmp_path)
    specs[0] = ("a", T.FP32, shape)
    _raises(lambda: load_combined(path, specs), "params.pdiparams", "record 0 (a)",
            f"expects {list(shape)}", "has [2, 3]")


def test_wildcard_shapes_match(tmp_path):
    path, specs, _ = _params(tmp_path)
    specs[0] = ("a", T.FP32, (-1, -1))
    assert load_combined(path, specs)["a"].shape == (2, 3)


def test_records_misassigned_by_order_are_caught(tmp_path):
    # A file written in natural (not byte-wise) order: the dims check catches the swap.
    path = tmp_path / "natural.pdiparams"
    with open(path, "wb") as f:
        write_tensor(f, np.zeros(2, np.float32))   # conv2d_2.w_0
        write_tensor(f, np.zeros(10, np.float32))  # conv2d_10.w_0
    specs = [("conv2d_2.w_0", T.FP32, (2,)), ("conv2d_10.w_0", T.FP32, (10,))]
    _raises(lambda: load_combined(path, specs), "natural.pdiparams", "record 0 (conv2d_10.w_0)",
            "expects [10]", "has [2]")


def test_error_bad_specs(tmp_path):
    path, specs, _ = _params(tmp_path)
    _raises(lambda: load_combined(path, specs + [specs[0]]), "params.pdiparams", "a", "twice")
    _raises(lambda: load_combined(path, [("a", "nonsense", (2, 3))]), "params.pdiparams", "a", "dtype")
    _raises(lambda: load_combined(path, [("a", T.FP32)]), "params.pdiparams", "spec 0")


def test_error_unstorable_value_names_file_and_var(tmp_path):
    path = tmp_path / "out.pdiparams"
    _raises(lambda: save_combined(path, {"ok": np.zeros(1), "bad_var": np.array(["s"])}),
            "out.pdiparams", "bad_var")
    _raises(lambda: save_combined(path, {"x": np.zeros(1)}, dtype_codes={"y": T.BF16}),
            "out.pdiparams", "y")
    assert not path.exists()
    assert os.listdir(tmp_path) == []


def test_no_other_exception_types_escape_on_random_corruption(tmp_path):
    path, specs, _ = _params(tmp_path)
    good = path.read_bytes()
    rng = np.random.default_rng(1)
    for trial in range(300):
        raw = bytearray(good)
        for pos in rng.integers(0, len(raw), size=rng.integers(1, 4)):
            raw[pos] = int(rng.integers(0, 256))
        raw = raw[: int(rng.integers(0, len(raw) + 1))] if trial % 3 == 0 else raw
        path.write_bytes(bytes(raw))
        for fn in (lambda: load_combined(path, specs), lambda: read_all_records(path)):
            try:
                fn()
            except TensorFileError as e:
                assert "params.pdiparams" in str(e)


# ------------------------------------------------------------------------------ atomicity


class _Exploding:
    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("boom while converting")


def test_atomic_failure_mid_write_keeps_old_file(tmp_path):
    path, specs, tensors = _params(tmp_path)
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="boom"):
        # "a" is written to the temp file first, then the conversion of "b" fails
        save_combined(path, {"a": np.ones((2, 3), np.float32), "b": _Exploding()})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["params.pdiparams"]
    np.testing.assert_array_equal(load_combined(path, specs)["a"], tensors["a"])


def test_atomic_failure_in_replace_keeps_old_file(tmp_path, monkeypatch):
    path, _, _ = _params(tmp_path)
    before = path.read_bytes()

    def failing_replace(src, dst):
        raise OSError("simulated rename failure")

    monkeypatch.setattr(atomic.os, "replace", failing_replace)
    with pytest.raises(OSError, match="simulated"):
        save_combined(path, {"z": np.zeros(4, np.float32)})
    with pytest.raises(OSError, match="simulated"):
        save_tensor(path, np.zeros(4, np.float32))
    with pytest.raises(OSError, match="simulated"):
        atomic_write(path, b"new")
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["params.pdiparams"]


def test_atomic_open_and_write(tmp_path):
    path = tmp_path / "f.bin"
    atomic_write(path, b"one")
    assert path.read_bytes() == b"one"
    os.chmod(path, 0o640)
    with atomic_open(path) as f:
        f.write(b"two")
        assert path.read_bytes() == b"one"  # not visible before the block ends
    assert path.read_bytes() == b"two"
    assert os.stat(path).st_mode & 0o777 == 0o640  # permissions of the replaced file kept
    with pytest.raises(KeyError):
        with atomic_open(path) as f:
            f.write(b"three")
            raise KeyError("abort")
    assert path.read_bytes() == b"two"
    assert os.listdir(tmp_path) == ["f.bin"]


def test_atomic_new_file_respects_umask(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "new.bin", b"x")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "new.bin").st_mode & 0o777 == 0o644


def test_no_pickle_or_eval_in_sources():
    import keel.program.io.atomic as m1
    import keel.program.io.tensor_file as m2
    for mod in (m1, m2):
        src = open(mod.__file__, encoding="utf-8").read()
        for word in ("pickle", "eval(", "exec("):
            assert word not in src, f"{word} in {mod.__file__}"


def test_write_into_missing_directory_names_the_target(tmp_path):
    target = tmp_path / "no_such_dir" / "model.pdiparams"
    with pytest.raises(FileNotFoundError) as info:
        save_combined(target, {"w": np.zeros(2, np.float32)})
    assert "no_such_dir" in str(info.value) and "model.pdiparams" in str(info.value)
    assert ".tmp" not in str(info.value)
