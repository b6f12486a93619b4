"""Concats read through affine index maps (codegen/interior.py ``Guards.pieces``): the loop of the stage axis the
Concat's axis follows is split where its input changes, and each region reads its input directly (no per-element
selection).  Results equal to the reference for byte and float Concats along the last and a leading axis, pieces
that are computed (a nearest upsampling, a requantization, a window over a Pad), Concats read through a Slice and a
Transpose, a strided Slice (not split), and the partition axis split across the pieces, on 1 and 2 threads.
Nearest upsamplings along the innermost axis (lower.py ``_inner_repeat``) emitted as one load and interleaved
stores per source element: the same values, with and without a Concat, in bytes and floats."""
from __future__ import annotations

import numpy as np
import pytest
from codegen_testutil import (
    F32,
    U8,
    Case,
    check_case,
    make_graph,
    random_array,
    shared_library,
)

from converter_lite.codegen.interior import NEVER, pad_guards

pytestmark = pytest.mark.needs_cc


def _const(b, a, dt=np.int64):
    return b.const(np.asarray(a, dt))


def upsample(b, x, shape):
    """Nearest 2x upsampling of (n, c, h, w) as the Resize expander writes it: Reshape -> Expand -> Reshape."""
    n, c, h, w = shape
    t = b.op("Reshape", x, _const(b, (n, c, h, 1, w, 1)))
    t = b.op("Expand", t, _const(b, (n, c, h, 2, w, 2)))
    return b.op("Reshape", t, _const(b, (n, c, 2 * h, 2 * w)))


def requantize(b, x, s_in, z_in, s_out, z_out):
    """QuantizeLinear(DequantizeLinear(x, s_in, z_in), s_out, z_out) as the quantize expander writes it."""
    f = (b.op("Cast", x, to=1) - _const(b, z_in, np.float32)) * _const(b, s_in, np.float32)
    t = b.op("Round", f / _const(b, s_out, np.float32)) + _const(b, z_out, np.float32)
    t = b.op("Where", b.op("IsNaN", t), _const(b, 0.0, np.float32), t)
    t = b.op("Min", b.op("Max", t, _const(b, 0.0, np.float32)), _const(b, 255.0, np.float32))
    return b.op("Cast", t, to=2)


def _bytes(rng, graph):
    return [random_array(rng, v.dtype, v.shape, positive=False) if v.dtype is F32 else
            rng.integers(0, 256, v.shape).astype(np.uint8) for v in graph.inputs]


def _case(name, inputs, fn):
    g = make_graph(name, inputs, fn)
    return Case(name, g, inputs=lambda rng, g=g: _bytes(rng, g))


CASES = [
    _case("u8_last", [(U8, (1, 6, 40)), (U8, (1, 6, 9)), (U8, (1, 6, 1))],
          lambda b, x, y, z: b.op("Concat", x, y, z, axis=2)),
    _case("u8_chan_upsample", [(U8, (1, 5, 4, 6)), (U8, (1, 3, 8, 12))],
          lambda b, x, y: b.op("Concat", requantize(b, upsample(b, x, (1, 5, 4, 6)), 0.02, 30, 0.03, 17),
                               requantize(b, y, 0.05, 128, 0.03, 17), axis=1)),
    _case("f32_chan_computed", [(F32, (1, 3, 7, 9)), (F32, (1, 4, 7, 9)), (F32, (1, 2, 7, 9))],
          lambda b, x, y, z: b.op("Concat", b.op("Sigmoid", x), y * _const(b, 2.0, np.float32), b.op("Neg", z),
                                  axis=1) + _const(b, 1.0, np.float32)),
    _case("f32_window_piece", [(F32, (1, 2, 6, 7)), (F32, (1, 3, 6, 7))],
          lambda b, x, y: b.op("Concat", b.op("Slice", b.op("Pad", x, _const(b, (0, 0, 1, 1, 0, 0, 1, 1))),
                                              _const(b, (1, 0)), _const(b, (7, 7)), _const(b, (2, 3))),
                               y, axis=1)),
    _case("u8_sliced", [(U8, (2, 3, 20)), (U8, (2, 3, 12))],
          lambda b, x, y: b.op("Slice", b.op("Concat", x, y, axis=2), _const(b, (5,)), _const(b, (27,)),
                               _const(b, (2,)))),
    _case("u8_strided", [(U8, (2, 3, 20)), (U8, (2, 3, 12))],
          lambda b, x, y: b.op("Slice", b.op("Concat", x, y, axis=2), _const(b, (1,)), _const(b, (30,)),
                               _const(b, (2,)), _const(b, (3,)))),
    _case("u8_wide_upsample", [(U8, (1, 5, 3, 20)), (U8, (1, 2, 6, 40))],
          lambda b, x, y: b.op("Concat", requantize(b, upsample(b, x, (1, 5, 3, 20)), 0.02, 30, 0.03, 17), y,
                               axis=1)),
    _case("f32_wide_upsample", [(F32, (2, 3, 2, 17))],
          lambda b, x: b.op("Sigmoid", upsample(b, x, (2, 3, 2, 17)))),
    _case("f32_transposed", [(F32, (1, 4, 5, 6)), (F32, (1, 4, 3, 6))],
          lambda b, x, y: b.op("Transpose", b.op("Concat", b.op("Abs", x), y, axis=2), perm=(0, 2, 3, 1))),
]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return shared_library(tmp_path_factory, "concat_pieces", CASES, num_threads=2, parallel_threshold=1)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_concat_matches_reference(lib, case, threads, rng):
    check_case(lib, case, rng, num_threads=threads)


def _pieces(case):
    g = case.graph
    return pad_guards(list(g.outputs), tuple(g.outputs[0].shape), lambda v: any(v is i for i in g.inputs)).pieces


def test_piece_ranges():
    """Each input's range along the stage axis the Concat's axis follows; through a Slice starting at 5 they
    shift by 5; a strided Slice (step 2) is not split."""
    assert list(_pieces(CASES[0]).values()) == [(2, ((0, 40), (40, 49), (49, 50)))]
    assert list(_pieces(CASES[1]).values()) == [(1, ((0, 5), (5, 8)))]
    assert list(_pieces(CASES[4]).values()) == [(2, ((-5, 15), (15, 27)))]
    assert list(_pieces(CASES[5]).values()) == [NEVER]
    assert list(_pieces(CASES[8]).values()) == [(1, ((0, 5), (5, 8)))]

