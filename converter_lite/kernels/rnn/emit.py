"""The recurrent-layer driver: one ONNX LSTM, GRU or RNN layer of float32, every time step in native code (a
support function).

    void cl_rnn_v1_f32(i8* desc, i64 nthreads)

A unit of work is one (direction ``d``, batch row ``n``) pair: its recurrence over the ``seq`` steps does not
depend on any other unit's, so units are the chunks of the thread pool (a bidirectional layer of batch 1 runs
its two directions on two threads).  Per step ``t`` (``seq - 1 - s`` for a reverse direction):

1. **gates** ``g[0:gt] = bias + x[t, n, :] @ Wt + h @ Rt`` in blocks of ``BLOCK`` columns (abi.py), each an
   8-vector accumulator in registers over the input's ``inp`` values, then the state's ``hidden`` values, each
   value broadcast and multiplied into one packed row (``cl_rnn.block``).  With ``xw`` the caller has computed
   ``bias + X @ Wt`` for every step and row beforehand (one GEMM per direction, runtime/fast/rnn.py: most of a
   layer's multiply-adds when ``inp`` is not small, and a GEMM reuses each weight across all rows); a step then
   starts from its row of it and adds the state's part only;
2. **state** for ``j < hidden`` (codegen/mathfn.py's sigmoid and tanh, widened by the loop vectorizer), by the
   record's ``cell`` (abi.py), ``g_q`` the gates' section ``q``:

   * LSTM (sections i, o, f, c): ``c = sigmoid(g_f) * c + sigmoid(g_i) * tanh(g_c)``, ``h = sigmoid(g_o) *
     tanh(c)``;
   * GRU with ``linear_before_reset`` (sections z, r, then h's input part and its state part apart):
     ``hh = tanh(g_2 + sigmoid(g_1) * g_3)``, ``h = (1 - z) * hh + z * h`` with ``z = sigmoid(g_0)``;
   * GRU without (sections z, r, h's input part): ``rh = sigmoid(g_1) * h``, then a second phase of blocks
     ``g2[0:gt2] = bias2 + rh @ Rt2`` (h's state weights), ``hh = tanh(g_2 + g2)``, ``h`` as above;
   * RNN (one section): ``h = tanh(g_0)``;

   then ``h`` copied to ``Y[t, d, n]`` when ``Y`` is wanted.

``h`` and ``c`` start at ``initial_h`` / ``initial_c`` (zeros when absent) and end in ``Y_h`` / ``Y_c`` when wanted.

Packed layouts (bind.py builds them once, 64-byte aligned): ONNX's gate order, each section's ``hidden``
columns padded to ``hp`` (a multiple of 16) and the sections' columns to ``gt`` (a multiple of ``BLOCK``), zeros
in the padding and where a section takes no input or no state part:

    Wt[d, k, q * hp + j] = W[d, gate(q) * hidden + j, k]        [nd, inp, gt]
    Rt[d, k, q * hp + j] = R[d, gate(q) * hidden + j, k]        [nd, hidden, gt]
    bias[d, q * hp + j]  = Wb + Rb of that gate's row j (only the part the section takes)      [nd, gt]
    Rt2, bias2                                                  [nd, hidden, gt2], [nd, gt2]: GRU's second phase

Record (i64 fields, ``FIELDS``): ``cell seq batch inp hidden hp gt gt2 nd``, ``reverse`` (bit ``d``: direction
``d`` runs backwards), ``x`` and its step / batch strides (elements; rows of ``inp`` contiguous), ``wt rt bias
rt2 bias2``, ``xw`` (0: none) and its direction stride (elements) and step / batch strides (rows of ``gt``),
``h0 c0`` (0: zeros) and their direction / batch strides, ``y`` (0: not wanted) and its step /
direction / batch strides, ``yh yc`` (0: not wanted) and theirs, ``scratch`` (per unit ``gt + gt2 + 3 * hp``
floats: gates of both phases, h, c, rh); then the units per chunk (written by the entry point).
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import chunk_body, chunked_entry, internal_function
from ...codegen.loops import for_range
from ...codegen.mathfn import MathEmitter
from ...codegen.types import F32, I64, VOID
from ...codegen.vector import FP, VECP, VL, c64, smin, splat, vector_intrinsics
from .abi import BLOCK, EXTRA, FIELDS, GRU_LINEAR, GRU_RESET, LSTM, RNN, SYMBOL

NB = BLOCK // VL
_F = {name: i for i, name in enumerate(FIELDS)}
BLOCK_TYPE = ir.FunctionType(VOID, [FP, FP, FP, I64, FP, I64, FP, FP, I64])
VECTORIZE = {"llvm.loop.vectorize.enable": True}


def _accumulate(b: ir.IRBuilder, fn: ir.Function, fma, accs: list, count, row, value, name: str) -> list:
    """``accs[v] += value(k) * row(k)[v*VL : (v+1)*VL]`` for ``k < count`` (a loop whose accumulators are
    phis, so they stay in registers); returns the accumulators after the loop."""
    entry = b.block
    head, body, done = (fn.append_basic_block(f"{name}.{part}") for part in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    k = b.phi(I64, f"{name}.k")
    k.add_incoming(c64(0), entry)
    phis = []
    for v, a in enumerate(accs):
        p = b.phi(a.type, f"{name}.acc{v}")
        p.add_incoming(a, entry)
        phis.append(p)
    b.cbranch(b.icmp_signed("<", k, count), body, done)
    b.position_at_end(body)
    s = splat(b, value(k))
    r = row(k)
    for v, p in enumerate(phis):
        w = b.load(b.bitcast(b.gep(r, [c64(v * VL)]), VECP), align=4)
        p.add_incoming(b.call(fma, [s, w, p]), body)
    k.add_incoming(b.add(k, c64(1), flags=("nsw", "nuw")), body)
    b.branch(head)
    b.position_at_end(done)
    return phis


def _block(module: ir.Module) -> ir.Function:
    """``cl_rnn.block(out, bias, wt, ld, x, kx, rt, h, kh)``: ``out[0:BLOCK] = bias + x[0:kx] @ wt + h[0:kh] @
    rt``, the rows of ``wt`` and ``rt`` ``ld`` floats apart."""
    fn = internal_function(module, "cl_rnn.block", BLOCK_TYPE, noalias=(0,))
    if not fn.is_declaration:
        return fn
    out, bias, wt, ld, x, kx, rt, h, kh = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    fma = vector_intrinsics(module)[0]
    accs = [b.load(b.bitcast(b.gep(bias, [c64(v * VL)]), VECP), align=4) for v in range(NB)]
    accs = _accumulate(b, fn, fma, accs, kx, lambda k: b.gep(wt, [b.mul(k, ld)]),
                       lambda k: b.load(b.gep(x, [k])), "x")
    accs = _accumulate(b, fn, fma, accs, kh, lambda k: b.gep(rt, [b.mul(k, ld)]),
                       lambda k: b.load(b.gep(h, [k])), "h")
    for v, a in enumerate(accs):
        b.store(a, b.bitcast(b.gep(out, [c64(v * VL)]), VECP), align=4)
    b.ret_void()
    return fn


def _copy(b: ir.IRBuilder, src, dst, n, name: str) -> None:
    with for_range(b, 0, n, name, VECTORIZE) as j:
        b.store(b.load(b.gep(src, [j])), b.gep(dst, [j]))


def _emit_body(module: ir.Module) -> ir.Function:
    fn, b, f, per_chunk = chunk_body(module, f"{SYMBOL}.units", FIELDS)
    block = _block(module)
    m = MathEmitter(b, module)
    seq, batch, inp, hidden, hp, gt, gt2 = (f[k] for k in ("seq", "batch", "inp", "hidden", "hp", "gt", "gt2"))
    x, wt, rt, bias, rt2, bias2, xw, scratch = (b.inttoptr(f[k], FP)
                                                for k in ("x", "wt", "rt", "bias", "rt2", "bias2", "xw", "scratch"))
    has_xw = b.icmp_signed("!=", f["xw"], c64(0))
    zero, one = ir.Constant(F32, 0.0), ir.Constant(F32, 1.0)
    units = b.mul(f["nd"], batch)
    u0 = b.mul(fn.args[1], per_chunk)

    def blocks(g, bias_d, wt_d, ld, xrow, kx, rt_d, hv, kh, cols):
        with for_range(b, 0, b.sdiv(cols, c64(BLOCK)), "blk") as k:
            o = b.mul(k, c64(BLOCK))
            b.call(block, [b.gep(g, [o]), b.gep(bias_d, [o]), b.gep(wt_d, [o]), ld, xrow, kx, b.gep(rt_d, [o]),
                           hv, kh])

    def cell_is(kind):
        return b.if_then(b.icmp_signed("==", f["cell"], c64(kind)))

    def gate(g, q, j):                                 # section q of a phase's gates, column j
        return b.load(b.gep(g, [b.add(b.mul(hp, c64(q)), j)]))

    def gru_update(z, hh, hj):                         # H = (1 - z) * hh + z * H
        b.store(b.fadd(b.fmul(b.fsub(one, z), hh), b.fmul(z, b.load(hj))), hj)

    with for_range(b, u0, smin(b, b.add(u0, per_chunk), units), "u") as u:
        d, n = b.sdiv(u, batch), b.srem(u, batch)
        rev = b.icmp_signed("!=", b.and_(b.ashr(f["reverse"], d), c64(1)), c64(0))
        g = b.gep(scratch, [b.mul(u, b.add(b.add(gt, gt2), b.mul(hp, c64(3))))])
        g2 = b.gep(g, [gt])
        h = b.gep(g2, [gt2])
        c = b.gep(h, [hp])
        rh = b.gep(c, [hp])
        wt_d, rt_d = b.gep(wt, [b.mul(d, b.mul(inp, gt))]), b.gep(rt, [b.mul(d, b.mul(hidden, gt))])
        bias_d, rt2_d, bias2_d = b.gep(bias, [b.mul(d, gt)]), b.gep(rt2, [b.mul(d, b.mul(hidden, gt2))]), \
            b.gep(bias2, [b.mul(d, gt2)])
        with for_range(b, 0, b.mul(hp, c64(3)), "z", VECTORIZE) as j:
            b.store(zero, b.gep(h, [j]))
        state_in = b.add(b.mul(d, f["i_ds"]), b.mul(n, f["i_bs"]))
        for src, dst, name in ((f["h0"], h, "h0"), (f["c0"], c, "c0")):
            with b.if_then(b.icmp_signed("!=", src, c64(0))):
                _copy(b, b.gep(b.inttoptr(src, FP), [state_in]), dst, hidden, name)
        with for_range(b, 0, seq, "s") as s:
            t = b.select(rev, b.sub(b.sub(seq, c64(1)), s), s)
            xrow = b.gep(x, [b.add(b.mul(t, f["x_ts"]), b.mul(n, f["x_bs"]))])
            # the input's part: this step's row of the precomputed projection (bias included), or computed here
            xw_at = b.add(b.mul(d, f["xw_ds"]), b.mul(b.add(b.mul(t, f["xw_ts"]), b.mul(n, f["xw_bs"])), gt))
            first = b.select(has_xw, b.gep(xw, [xw_at]), bias_d)
            blocks(g, first, wt_d, gt, xrow, b.select(has_xw, c64(0), inp), rt_d, h, hidden, gt)
            with cell_is(LSTM), for_range(b, 0, hidden, "j", VECTORIZE) as j:
                gi, go, gf, gc = (gate(g, q, j) for q in range(4))
                cj = b.gep(c, [j])
                cn = b.fadd(b.fmul(m.sigmoid(gf), b.load(cj)), b.fmul(m.sigmoid(gi), m.tanh(gc)))
                b.store(cn, cj)
                b.store(b.fmul(m.sigmoid(go), m.tanh(cn)), b.gep(h, [j]))
            with cell_is(GRU_LINEAR), for_range(b, 0, hidden, "j", VECTORIZE) as j:
                hh = m.tanh(b.fadd(gate(g, 2, j), b.fmul(m.sigmoid(gate(g, 1, j)), gate(g, 3, j))))
                gru_update(m.sigmoid(gate(g, 0, j)), hh, b.gep(h, [j]))
            with cell_is(GRU_RESET):
                with for_range(b, 0, hidden, "j", VECTORIZE) as j:
                    b.store(b.fmul(m.sigmoid(gate(g, 1, j)), b.load(b.gep(h, [j]))), b.gep(rh, [j]))
                blocks(g2, bias2_d, rt2_d, gt2, rh, c64(0), rt2_d, rh, hidden, gt2)
                with for_range(b, 0, hidden, "j", VECTORIZE) as j:
                    hh = m.tanh(b.fadd(gate(g, 2, j), b.load(b.gep(g2, [j]))))
                    gru_update(m.sigmoid(gate(g, 0, j)), hh, b.gep(h, [j]))
            with cell_is(RNN), for_range(b, 0, hidden, "j", VECTORIZE) as j:
                b.store(m.tanh(gate(g, 0, j)), b.gep(h, [j]))
            with b.if_then(b.icmp_signed("!=", f["y"], c64(0))):
                at = b.add(b.mul(t, f["y_ts"]), b.add(b.mul(d, f["y_ds"]), b.mul(n, f["y_bs"])))
                _copy(b, h, b.gep(b.inttoptr(f["y"], FP), [at]), hidden, "y")
        state_out = b.add(b.mul(d, f["o_ds"]), b.mul(n, f["o_bs"]))
        for dst, src, name in ((f["yh"], h, "yh"), (f["yc"], c, "yc")):
            with b.if_then(b.icmp_signed("!=", dst, c64(0))):
                _copy(b, src, b.gep(b.inttoptr(dst, FP), [state_out]), hidden, name)
    b.ret_void()
    return fn


def emit_rnn(module: ir.Module) -> ir.Function:
    """Defines ``cl_rnn_v1_f32(i8* desc, i64 nthreads)`` (see the module doc) in ``module``."""
    def units(b, d):                                   # (direction, batch row) pairs
        return b.mul(b.load(b.gep(d, [c64(_F["nd"])])), b.load(b.gep(d, [c64(_F["batch"])])))
    return chunked_entry(module, SYMBOL, _emit_body(module), units, len(FIELDS), 1)


assert EXTRA == 1                         # units per chunk, written by the entry point
EMITTERS = {SYMBOL: emit_rnn}
