"""Window reads of constant Pads (codegen/interior.py): guard ranges traced through the index maps, the loop
nest split into border and interior, and results equal to the reference for strided, dilated, asymmetric,
NHWC (partition axis split), transposed, tiny (empty interior), non-zero-fill and non-affine windows, on 1 and 2
threads."""
from __future__ import annotations

import numpy as np
import pytest
from codegen_testutil import F32, F64, Case, check_case, make_graph, shared_library

from converter_lite.codegen.interior import NEVER, pad_guards, split_axes

pytestmark = pytest.mark.needs_cc


def window(b, x, shape, k, axes=(2, 3), pads=(1, 1, 1, 1), strides=(1, 1), dil=(1, 1), fill=None, chan=None,
           dt=np.float32):
    """sum over taps of Slice(Pad(x)) * w_tap (the depthwise convolution expansion), then Relu-like Max."""
    rank = len(shape)
    begin, end = [0] * rank, [0] * rank
    (begin[axes[0]], begin[axes[1]], end[axes[0]], end[axes[1]]) = pads
    args = [x, b.const(np.asarray(begin + end, np.int64))]
    if fill is not None:
        args.append(b.const(np.asarray(fill, dt)))
    xp = b.op("Pad", *args)
    hp, wp = shape[axes[0]] + pads[0] + pads[2], shape[axes[1]] + pads[1] + pads[3]
    oh = (hp - dil[0] * (k[0] - 1) - 1) // strides[0] + 1
    ow = (wp - dil[1] * (k[1] - 1) - 1) // strides[1] + 1
    acc = None
    for p in range(k[0]):
        for q in range(k[1]):
            r0, c0 = p * dil[0], q * dil[1]
            tap = b.op("Slice", xp, b.const(np.asarray((r0, c0), np.int64)),
                       b.const(np.asarray((r0 + (oh - 1) * strides[0] + 1, c0 + (ow - 1) * strides[1] + 1),
                                          np.int64)),
                       b.const(np.asarray(axes, np.int64)), b.const(np.asarray(strides, np.int64)))
            w = (0.5 + 0.25 * (p * k[1] + q) % 3) * (np.ones(chan) if chan else 1.0)
            term = tap * b.const(np.asarray(w, dt))
            acc = term if acc is None else acc + term
    return b.op("Max", acc, b.const(np.asarray(-1.0, dt)))


def _case(name, shape, dt=F32, **kw):
    return Case(name, make_graph(name, [(dt, shape)], lambda b, x: window(b, x, shape, dt=dt.np, **kw)))


CASES = [
    _case("w3x3", (1, 5, 9, 11), k=(3, 3)),
    _case("w3x3_s2_asym", (1, 4, 10, 9), k=(3, 3), pads=(0, 1, 2, 1), strides=(2, 2)),
    _case("w5x5_dil", (1, 3, 12, 13), k=(5, 3), pads=(4, 2, 3, 1), dil=(2, 1)),
    _case("w7x7_nhwc", (1, 9, 10, 16), k=(7, 7), axes=(1, 2), pads=(3, 3, 3, 3), chan=(16,)),
    _case("w5x5_tiny", (1, 3, 2, 3), k=(5, 5), pads=(2, 2, 2, 2)),
    _case("w3x3_fill", (1, 2, 6, 7), k=(3, 3), fill=2.5),
    _case("w3x3_f64", (1, 3, 8, 8), dt=F64, k=(3, 3)),
    Case("w3x3_transposed_out", make_graph("w3x3_transposed_out", [(F32, (1, 4, 7, 9))], lambda b, x: b.op(
        "Transpose", window(b, x, (1, 4, 7, 9), k=(3, 3)), perm=(0, 2, 3, 1)))),
    Case("w3x3_reshaped_out", make_graph("w3x3_reshaped_out", [(F32, (1, 4, 7, 9))], lambda b, x: b.op(
        "Reshape", window(b, x, (1, 4, 7, 9), k=(3, 3)), b.const(np.asarray((4, 63), np.int64))))),
    _case("w3x3_wide", (1, 2, 5, 75), k=(3, 3)),                        # 16-lane interior (WIDE_INTERIOR)
]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return shared_library(tmp_path_factory, "interior", CASES, num_threads=2, parallel_threshold=1)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_window_matches_reference(lib, case, threads, rng):
    check_case(lib, case, rng, num_threads=threads)


def _guards(case):
    g = case.graph
    return pad_guards(list(g.outputs), tuple(g.outputs[0].shape), lambda v: any(v is i for i in g.inputs))


def test_guard_ranges_of_a_3x3_window():
    """Pad 1 on H and W, taps at offsets 0..2: inside for every tap on rows/columns 1 .. n-2."""
    gs = _guards(CASES[0])
    assert sorted(st for st in gs.ranges.values()) == [(2, 1, 7), (3, 1, 9)]
    assert split_axes(gs, (1, 5, 9, 11)) == {2: (1, 8), 3: (1, 10)}


def test_guard_ranges_follow_strides_and_transposes():
    gs = _guards(CASES[1])                  # pads (0, 1, 2, 1), stride 2: rows need 2*i + p <= 9 + 0
    assert split_axes(gs, tuple(CASES[1].graph.outputs[0].shape)) == {2: (0, 4), 3: (1, 4)}
    gs = _guards(CASES[7])                  # the window's H, W are axes 1, 2 of the transposed output
    assert set(split_axes(gs, (1, 7, 9, 4))) == {1, 2}


def test_empty_interior_is_not_split_and_non_affine_reads_keep_their_guards():
    assert split_axes(_guards(CASES[4]), (1, 3, 2, 3)) == {}
    assert set(_guards(CASES[8]).ranges.values()) == {NEVER}
