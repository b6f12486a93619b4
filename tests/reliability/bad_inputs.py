"""Makers of the bad inputs of test_bad_input_matrix.py: broken ONNX models, damaged .ms files, config files.

Every maker is a plain function of a ``Workspace`` (the case's private directory tree) that writes the input
and returns its path, so that a matrix row reads ``ws.onnx("cyclic", cyclic())``.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import zlib

import numpy as np
import onnx
import onnx.helper as oh
from helpers import make_model, tensor_info

from converter_lite.model import load_model, save_model
from converter_lite.model.format import FORMAT_VERSION

F32 = np.float32


class Workspace:
    """``root/inputs`` holds what a case hands the command, ``root/out`` is the output directory, ``root/work``
    the working directory; ``snapshot()`` lists every file (path, size, mtime) to prove nothing was written."""

    def __init__(self, root: str, good_ms: str):
        self.root = root
        self.inputs = os.path.join(root, "inputs")
        self.out = os.path.join(root, "out")
        self.work = os.path.join(root, "work")
        for d in (self.inputs, self.out, self.work):
            os.makedirs(d, exist_ok=True)
        self._good_ms = good_ms

    def path(self, name: str) -> str:
        return os.path.join(self.inputs, name)

    def mkdir(self, rel: str) -> str:
        p = os.path.join(self.root, rel)
        os.makedirs(p, exist_ok=True)
        return p

    def file(self, name: str, data: bytes | str) -> str:
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        return p

    def onnx(self, name: str, model: onnx.ModelProto) -> str:
        return self.file(name + ".onnx", model.SerializeToString())

    def good_ms(self) -> str:
        p = self.path("good.ms")
        if not os.path.exists(p):
            shutil.copyfile(self._good_ms, p)
        return p

    def good_bytes(self) -> bytes:
        with open(self.good_ms(), "rb") as f:
            return f.read()

    def ms(self, name: str, data: bytes) -> str:
        return self.file(name + ".ms", data)

    def snapshot(self) -> dict[str, tuple[int, int]]:
        out = {}
        for d, _, files in os.walk(self.root):
            for f in files:
                p = os.path.join(d, f)
                st = os.stat(p)
                out[os.path.relpath(p, self.root)] = (st.st_size, st.st_mtime_ns)
        return out


# -- ONNX models -------------------------------------------------------------------------------------------------
def relu(shape=(2, 3), dtype=F32) -> onnx.ModelProto:
    return make_model([oh.make_node("Relu", ["x"], ["y"], name="relu0")], [tensor_info("x", dtype, list(shape))],
                      [tensor_info("y", dtype, list(shape))])


def two_inputs() -> onnx.ModelProto:
    """y = x * 2 + 1 (float32[2,3]) and n1 = n + 1 (int64[3]): the benchmark-input cases' model."""
    nodes = [oh.make_node("Mul", ["x", "two"], ["m"], name="mul0"),
             oh.make_node("Add", ["m", "one"], ["y"], name="add0"),
             oh.make_node("Add", ["n", "one_i"], ["n1"], name="add1")]
    return make_model(nodes, [tensor_info("x", F32, [2, 3]), tensor_info("n", np.int64, [3])],
                      [tensor_info("y", F32, [2, 3]), tensor_info("n1", np.int64, [3])],
                      {"two": F32(2), "one": F32(1), "one_i": np.int64(1)})


def cyclic() -> onnx.ModelProto:
    nodes = [oh.make_node("Add", ["x", "t2"], ["t1"], name="add_loop"),
             oh.make_node("Relu", ["t1"], ["t2"], name="relu_loop")]
    return make_model(nodes, [tensor_info("x", F32, [2])], [tensor_info("t2", F32, [2])])


def dangling_input() -> onnx.ModelProto:
    return make_model([oh.make_node("Add", ["x", "ghost"], ["y"], name="add_ghost")], [tensor_info("x", F32, [2])],
                      [tensor_info("y", F32, [2])])


def duplicate_output() -> onnx.ModelProto:
    """Two nodes producing the same tensor ``t``."""
    nodes = [oh.make_node("Relu", ["x"], ["t"], name="first_t"), oh.make_node("Neg", ["x"], ["t"], name="second_t"),
             oh.make_node("Abs", ["t"], ["y"], name="abs0")]
    return make_model(nodes, [tensor_info("x", F32, [2])], [tensor_info("y", F32, [2])])


def broadcast_contradiction() -> onnx.ModelProto:
    return make_model([oh.make_node("Add", ["x", "c"], ["y"], name="add_bad")], [tensor_info("x", F32, [2, 3])],
                      [tensor_info("y", F32, [2, 3])], {"c": np.ones(4, F32)})


def reshape_contradiction() -> onnx.ModelProto:
    return make_model([oh.make_node("Reshape", ["x", "s"], ["y"], name="reshape_bad")],
                      [tensor_info("x", F32, [2, 3])], [tensor_info("y", F32, [4])], {"s": np.array([4])})


def declared_output_contradiction() -> onnx.ModelProto:
    """The graph declares output ``y`` as float32[5]; Relu of float32[2,3] computes [2,3]."""
    return make_model([oh.make_node("Relu", ["x"], ["y"], name="relu0")], [tensor_info("x", F32, [2, 3])],
                      [tensor_info("y", F32, [5])])


def huge_input() -> onnx.ModelProto:
    return relu(shape=(10**12,))


def huge_expand(shape=(100000, 100000, 100)) -> onnx.ModelProto:
    shape = list(shape)
    nodes = [oh.make_node("Expand", ["x", "s"], ["t"], name="expand_huge"),
             oh.make_node("Relu", ["t"], ["y"], name="relu0")]
    return make_model(nodes, [tensor_info("x", F32, [1])], [tensor_info("y", F32, shape)],
                      {"s": np.array(shape, np.int64)})


def zero_size() -> onnx.ModelProto:
    nodes = [oh.make_node("Relu", ["x"], ["t"], name="relu0"), oh.make_node("Add", ["t", "c"], ["y"], name="add0"),
             oh.make_node("ReduceSum", ["y", "axes"], ["s"], name="sum0", keepdims=0)]
    return make_model(nodes, [tensor_info("x", F32, [0, 3])],
                      [tensor_info("y", F32, [0, 3]), tensor_info("s", F32, [3])],
                      {"c": np.ones(3, F32), "axes": np.array([0])})


def elem_type(code: int) -> onnx.ModelProto:
    """Relu whose input and output are of ONNX element type ``code`` (e.g. 14 complex64, 26 int2)."""
    m = relu()
    for v in (m.graph.input[0], m.graph.output[0]):
        v.type.tensor_type.elem_type = code
    return m


def short_initializer() -> onnx.ModelProto:
    m = make_model([oh.make_node("Add", ["x", "w"], ["y"], name="add0")], [tensor_info("x", F32, [4])],
                   [tensor_info("y", F32, [4])], {"w": np.ones(4, F32)})
    m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:6]
    return m


def shapeless_input() -> onnx.ModelProto:
    return make_model([oh.make_node("Relu", ["x"], ["y"], name="relu0")],
                      [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)], [tensor_info("y", F32, [2])])


def map_input() -> onnx.ModelProto:
    """A map-typed input (sequences and optionals convert; maps do not)."""
    map_t = oh.make_map_type_proto(onnx.TensorProto.INT64, oh.make_tensor_type_proto(onnx.TensorProto.FLOAT, [2]))
    return make_model([oh.make_node("Identity", ["m"], ["y"], name="id0")],
                      [oh.make_value_info("m", map_t)], [oh.make_value_info("y", map_t)])


def unproduced_output() -> onnx.ModelProto:
    m = relu()
    m.graph.output.append(tensor_info("nowhere", F32, [2, 3]))
    return m


def custom_op() -> onnx.ModelProto:
    m = make_model([oh.make_node("Fancy", ["x"], ["y"], domain="acme", name="fancy0")], [tensor_info("x", F32, [2])],
                   [tensor_info("y", F32, [2])])
    m.opset_import.append(oh.make_opsetid("acme", 1))
    return m


# -- .ms files ---------------------------------------------------------------------------------------------------
def _layout(data: bytes) -> tuple[dict, int]:
    """(header JSON, data-area start) of a .ms file."""
    header_len = struct.unpack("<Q", data[8:16])[0]
    header = json.loads(zlib.decompress(data[32:32 + header_len]))      # (format version 3: compressed)
    return header, -(-(32 + header_len) // 64) * 64


def flip(data: bytes, pos: int) -> bytes:
    b = bytearray(data)
    b[pos] ^= 0xFF
    return bytes(b)


def flip_in_section(data: bytes, prefix: str) -> bytes:
    """``data`` with a byte flipped in the middle of the first section whose name starts with ``prefix``."""
    header, start = _layout(data)
    sec = next(s for s in header["sections"] if s["name"].startswith(prefix) and s["size"] > 0)
    return flip(data, start + sec["offset"] + sec["size"] // 2)


def other_version(data: bytes) -> bytes:
    return data[:4] + struct.pack("<I", FORMAT_VERSION + 1) + data[8:]


def foreign_cpu(good_ms: str, out_path: str, feature: str = "avx512fp16", triple: str | None = None) -> str:
    """A valid copy of ``good_ms`` whose native code claims to need a CPU feature (or architecture) this host
    lacks, re-saved with correct checksums."""
    m = load_model(good_ms)
    sections = {k: bytes(v) for k, v in m.sections.items()}
    target = json.loads(sections["native/target.json"])
    target["required_features"] = sorted(set(target.get("required_features") or []) | {feature})
    if triple:
        target["triple"] = triple
    sections["native/target.json"] = json.dumps(target).encode()
    return save_model(out_path, m.graph, m.metadata, sections)
