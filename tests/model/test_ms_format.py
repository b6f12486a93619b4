"""Round trips and every corrupt-file case of the .ms container (converter_lite/model/format.py)."""
from __future__ import annotations

import json
import os
import struct
import time
import zlib

import numpy as np
import pytest

from converter_lite.errors import RET_GRAPH_FILE_ERR, ConverterError
from converter_lite.ir import DType, Graph, Node, TensorType, Value
from converter_lite.model import FORMAT_VERSION, MAGIC, load_model, save_model
from converter_lite.model.graph_codec import ALIGN

NUMERIC = [d for d in DType if d is not DType.string]


def _gk_graph():
    """main: x -> GraphKernel(sub: Mul(sx, c) -> nested GraphKernel(Relu)) -> y; plus constant outputs."""
    ix = Value("ix", TensorType(DType.float32, (2, 3)))
    iy = Value("iy", TensorType(DType.float32, (2, 3)))
    inner = Graph("inner", [ix], [iy], [Node("Relu", [ix], [iy], name="relu")])
    sx = Value("sx", TensorType(DType.float32, (2, 3)))
    c = Value("c", const=np.full((2, 3), 2.0, np.float32))
    sm = Value("sm", TensorType(DType.float32, (2, 3)))
    so = Value("so", TensorType(DType.float32, (2, 3)))
    sub = Graph("sub", [sx], [so], [
        Node("Mul", [sx, c], [sm], name="mul"),
        Node("GraphKernel", [sm], [so], {"graph": inner, "kernel_name": "inner_k"}, name="gk_inner"),
    ])
    x = Value("x", TensorType(DType.float32, (2, 3)))
    y = Value("y", TensorType(DType.float32, (2, 3)))
    attrs = {"graph": sub, "kernel_name": "Fused_Mul_Relu_0", "source_nodes": ("mul0", "relu0"),
             "i": -3, "f": 0.25, "s": "text", "b": True, "none": None, "ints": (1, 2, 3), "floats": (0.5, 1e-9),
             "strs": ("a", "b"), "empty": (), "nested": ((1, 2), (3,)), "arr": np.arange(5, dtype=np.int64),
             "scalar": np.float32(1.5), "inf": float("inf"), "nan": float("nan"), "dict": {"k": (1, 2)}}
    return Graph("main", [x], [y], [Node("GraphKernel", [x], [y], attrs, name="gk0")])


def _assert_graph_equal(a: Graph, b: Graph):
    assert a.name == b.name
    assert [(v.name, v.type) for v in a.inputs] == [(v.name, v.type) for v in b.inputs]
    assert [(v.name, v.type) for v in a.outputs] == [(v.name, v.type) for v in b.outputs]
    assert len(a.nodes) == len(b.nodes)
    for n, m in zip(a.nodes, b.nodes):
        assert (n.op, n.name) == (m.op, m.name)
        assert [None if v is None else (v.name, v.type) for v in n.inputs] == \
               [None if v is None else (v.name, v.type) for v in m.inputs]
        assert [(v.name, v.type) for v in n.outputs] == [(v.name, v.type) for v in m.outputs]
        for v, w in zip(n.inputs, m.inputs):
            if v is not None and v.const is not None:
                np.testing.assert_array_equal(v.const, w.const)
                assert v.const.dtype == w.const.dtype
        assert n.attrs.keys() == m.attrs.keys()
        for k in n.attrs:
            _assert_attr_equal(n.attrs[k], m.attrs[k])


def _assert_attr_equal(x, y):
    if isinstance(x, Graph):
        _assert_graph_equal(x, y)
    elif isinstance(x, np.ndarray):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)
    elif isinstance(x, float) and np.isnan(x):
        assert np.isnan(y)
    elif isinstance(x, dict):
        assert x.keys() == y.keys()
        for k in x:
            _assert_attr_equal(x[k], y[k])
    else:
        assert type(x) is type(y) and x == y


def test_round_trip_nested_graph_kernel(tmp_path):
    g = _gk_graph()
    path = save_model(tmp_path / "m.ms", g, {"graph_kernel_flags": {"opt_level": 2}},
                      {"native/lib.so": b"\x7fELF...", "native/target": b'{"triple": "x86_64"}'})
    m = load_model(path)
    _assert_graph_equal(g, m.graph)
    assert m.metadata["graph_kernel_flags"] == {"opt_level": 2}
    assert m.metadata["converter_version"]
    assert {k: bytes(v) for k, v in m.sections.items()} == {"native/lib.so": b"\x7fELF...",
                                                           "native/target": b'{"triple": "x86_64"}'}
    # uses and producers are rebuilt
    node = m.graph.nodes[0]
    assert node.outputs[0].producer is node and m.graph.inputs[0].uses == [(node, 0)]
    assert os.listdir(tmp_path) == ["m.ms"]


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (7,), (2, 3, 5)], ids=str)
@pytest.mark.parametrize("use_mmap", [True, False])
def test_constants_all_dtypes_and_shapes(tmp_path, rng, dtype, shape, use_mmap):
    data = (rng.standard_normal(shape) * 50).astype(dtype.np)
    c = Value("c", const=data)
    g = Graph("g", [], [c], [])
    m = load_model(save_model(tmp_path / "c.ms", g, {}), mmap=use_mmap)
    out = m.graph.outputs[0].const
    assert out.dtype == data.dtype and out.shape == data.shape
    np.testing.assert_array_equal(out, data)
    if data.size:
        assert not out.flags.writeable           # views the file, never a private copy


def test_string_constant_and_shared_arrays(tmp_path):
    s = Value("s", const=np.array([["a", "bc"], ["", "d"]], dtype=object))
    shared = np.arange(1000, dtype=np.float32)
    a, b = Value("a", const=shared), Value("b", const=shared)
    g = Graph("g", [], [s, a, b], [])
    path = save_model(tmp_path / "s.ms", g, {})
    m = load_model(path)
    np.testing.assert_array_equal(m.graph.outputs[0].const, s.const)
    np.testing.assert_array_equal(m.graph.outputs[2].const, shared)
    assert os.path.getsize(path) < 1000 * 4 * 2          # the shared array is stored once


def test_constants_are_64_byte_aligned(tmp_path):
    consts = [Value(f"c{i}", const=np.ones(n, np.uint8)) for i, n in enumerate([1, 3, 65, 7, 128])]
    m = load_model(save_model(tmp_path / "a.ms", Graph("g", [], consts, []), {}))
    for v in m.graph.outputs:
        assert v.const.ctypes.data % ALIGN == 0


def test_unstorable_attribute_leaves_nothing(tmp_path):
    x = Value("x", TensorType(DType.float32, (1,)))
    y = Value("y", TensorType(DType.float32, (1,)))
    g = Graph("g", [x], [y], [Node("Relu", [x], [y], {"bad": object()}, name="r")])
    with pytest.raises(ConverterError, match="r.*object"):
        save_model(tmp_path / "bad.ms", g, {})
    assert os.listdir(tmp_path) == []


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(ConverterError, match="cannot write"):
        save_model(tmp_path / "no_such_dir" / "m.ms", _gk_graph(), {})
    assert os.listdir(tmp_path) == []


def test_save_replaces_existing_file(tmp_path):
    p = tmp_path / "m.ms"
    p.write_bytes(b"old")
    save_model(p, _gk_graph(), {"v": 2})
    assert load_model(p).metadata["v"] == 2


# -- corrupt files -------------------------------------------------------------------------------------------
@pytest.fixture
def good_file(tmp_path):
    w = Value("w", const=np.arange(4096, dtype=np.float32))
    x = Value("x", TensorType(DType.float32, (4096,)))
    y = Value("y", TensorType(DType.float32, (4096,)))
    g = Graph("g", [x], [y], [Node("Add", [x, w], [y], name="add")])
    path = save_model(tmp_path / "good.ms", g, {"note": "x"}, {"native/blob": b"\x01" * 100})
    return path, open(path, "rb").read()


def _expect_error(path, pattern):
    with pytest.raises(ConverterError) as e:
        load_model(path)
    assert e.value.code == RET_GRAPH_FILE_ERR
    assert str(path) in e.value.message
    assert pytest.importorskip("re").search(pattern, e.value.message), e.value.message


@pytest.mark.parametrize("cut", [1, 3, 4, 16, 31, 32, 100, -4097, -101, -1])
def test_truncated(tmp_path, good_file, cut):
    _, data = good_file
    p = tmp_path / "t.ms"
    p.write_bytes(data[:cut])
    _expect_error(p, "truncated")


def test_empty_file(tmp_path):
    p = tmp_path / "e.ms"
    p.write_bytes(b"")
    _expect_error(p, "empty")


def test_bad_magic(tmp_path):
    p = tmp_path / "x.ms"
    p.write_bytes(b"PK\x03\x04" + bytes(100))
    _expect_error(p, "not a converter_lite .ms model")


def test_onnx_file_is_not_a_model(tmp_path):
    p = tmp_path / "m.onnx"
    p.write_bytes(b"\x08\x0a\x12\x07pytorch" + bytes(50))
    _expect_error(p, "not a converter_lite")


def test_other_version(tmp_path, good_file):
    _, data = good_file
    p = tmp_path / "v.ms"
    p.write_bytes(data[:4] + struct.pack("<I", FORMAT_VERSION + 1) + data[8:])
    _expect_error(p, f"format version {FORMAT_VERSION + 1}.*reads version .*{FORMAT_VERSION}")


def test_flipped_byte_in_header(tmp_path, good_file):
    _, data = good_file
    p = tmp_path / "h.ms"
    b = bytearray(data)
    b[40] ^= 0x20
    p.write_bytes(bytes(b))
    _expect_error(p, "corrupted.*header checksum")


@pytest.mark.parametrize("where", [0, 1000, -101, -1])
def test_flipped_byte_in_sections(tmp_path, good_file, where):
    _, data = good_file
    header_len = struct.unpack("<Q", data[8:16])[0]
    data_start = -(-(32 + header_len) // 64) * 64
    b = bytearray(data)
    pos = data_start + where if where >= 0 else len(b) + where
    b[pos] ^= 0xFF
    p = tmp_path / "w.ms"
    p.write_bytes(bytes(b))
    _expect_error(p, "corrupted.*checksum mismatch in section")


def test_trailing_garbage(tmp_path, good_file):
    _, data = good_file
    p = tmp_path / "g.ms"
    p.write_bytes(data + b"junk")
    _expect_error(p, "corrupted")


def _header(data: bytes) -> bytes:
    """The JSON header of a (version 3: zlib-compressed header) file."""
    return zlib.decompress(data[32: 32 + struct.unpack("<Q", data[8:16])[0]])


def _rewrite_header(data: bytes, header: bytes, version: int = FORMAT_VERSION) -> bytes:
    """A file whose JSON header is replaced (compressed from version 3, with a valid checksum), e.g. to test
    header validation."""
    stored = header if version < 3 else zlib.compress(header)
    old_len = struct.unpack("<Q", data[8:16])[0]
    old_start = -(-(32 + old_len) // 64) * 64
    new_start = -(-(32 + len(stored)) // 64) * 64
    body = data[old_start:]
    prefix = struct.pack("<4sIQIIQ", MAGIC, version, len(stored), zlib.crc32(stored), 0, new_start + len(body))
    return prefix + stored + bytes(new_start - 32 - len(stored)) + body


@pytest.mark.parametrize("mutate", [
    lambda h: b"{not json",
    lambda h: json.dumps({"graph": {}}).encode(),
    lambda h: json.dumps({**json.loads(h), "graph": {"values": "x"}}).encode(),
    lambda h: h.replace(b'"op":"Add"', b'"op":"Add","attrs2":1').replace(b'"inputs":[0,1]', b'"inputs":[0,99]'),
    lambda h: h.replace(b'"offset":0,', b'"offset":999999999,', 1),
], ids=["not-json", "missing-keys", "bad-values", "bad-value-ref", "section-outside"])
def test_invalid_header(tmp_path, good_file, mutate):
    _, data = good_file
    p = tmp_path / "i.ms"
    p.write_bytes(_rewrite_header(data, mutate(_header(data))))
    _expect_error(p, "invalid header")


def test_a_compressed_header_that_is_not_zlib_is_invalid(tmp_path, good_file):
    _, data = good_file
    junk = b"not zlib data at all"
    old_start = -(-(32 + struct.unpack("<Q", data[8:16])[0]) // 64) * 64
    new_start = -(-(32 + len(junk)) // 64) * 64
    body = data[old_start:]
    p = tmp_path / "z.ms"
    p.write_bytes(struct.pack("<4sIQIIQ", MAGIC, FORMAT_VERSION, len(junk), zlib.crc32(junk), 0, new_start + len(body))
                  + junk + bytes(new_start - 32 - len(junk)) + body)
    _expect_error(p, "invalid header")


def test_version_2_files_with_a_plain_header_still_load(tmp_path, good_file):
    """Format version 2 stored the JSON header uncompressed; such files load as before."""
    path, data = good_file
    p = tmp_path / "v2.ms"
    p.write_bytes(_rewrite_header(data, _header(data), version=2))
    old, new = load_model(p), load_model(path)
    assert old.format_version == 2 and old.metadata == new.metadata
    assert [n.op for n in old.graph.nodes] == [n.op for n in new.graph.nodes]


def test_load_time_of_50mb_weights(tmp_path):
    """Prints the load time of a ~50 MB model (no timing assertion: the machine is shared)."""
    consts = [Value(f"w{i}", const=np.full(1 << 20, i, np.float32)) for i in range(12)]   # 12 x 4 MiB
    path = save_model(tmp_path / "big.ms", Graph("big", [], consts, []), {})
    load_model(path)                                                        # warm the page cache
    t0 = time.perf_counter()
    m = load_model(path)
    dt = time.perf_counter() - t0
    print(f"\nload of {os.path.getsize(path) / 1e6:.1f} MB model: {dt * 1e3:.1f} ms")
    assert m.graph.outputs[11].const[123] == 11


def test_a_version_1_file_asks_to_be_reconverted(tmp_path):
    """Version 1 left the choice of native drivers to the runtime (and linked every driver): such a file is
    refused with a message that says to reconvert it, naming the file."""
    p = tmp_path / "old.ms"
    save_model(p, Graph("g"), {})
    data = p.read_bytes()
    p.write_bytes(data[:4] + struct.pack("<I", 1) + data[8:])
    _expect_error(p, r"format version 1 \(converted by an older converter_lite\).*reconvert the model")
