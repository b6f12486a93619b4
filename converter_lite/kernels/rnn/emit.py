"""The recurrent-layer driver: one ONNX LSTM, GRU or RNN layer of float32, every time step in native code (a
support function).

    void cl_rnn_v1_f32(i8* desc, i64 nthreads)

A unit of work is one direction ``d`` and a group of up to ``rpg`` batch rows (abi.py ``ROWS_MAX``; bind.py
``rows_per_group`` keeps at least as many units as threads): its recurrence over the ``seq`` steps does not
depend on any other unit's, so units are the chunks of the thread pool (a bidirectional layer of batch 1 runs
its two directions on two threads).  Per step ``t`` (``seq - 1 - s`` for a reverse direction):

1. **gates** ``g[r, 0:gt] = bias + x[t, n0 + r, :] @ Wt + h[r] @ Rt`` for the group's rows ``r`` in blocks of
   ``BLOCK`` columns (abi.py): accumulators in registers (one row: 8 vectors; 2-4 rows: 4 vectors each, two
   half blocks) over the input's ``inp`` values, then the state's ``hidden`` values, each weight vector loaded
   once for all the rows and each row's value broadcast into it (``cl_rnn.block<rows>``; 32 steps of a
   bidirectional LSTM, hidden 96, over 8 rows: 479 -> 217 us with 4-row blocks).  With ``xw`` the caller has computed
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

Record (i64 fields, ``FIELDS``): ``cell seq batch rpg inp hidden hp gt gt2 nd``, ``reverse`` (bit ``d``:
direction ``d`` runs backwards), ``x`` and its step / batch strides (elements; rows of ``inp`` contiguous),
``wt rt bias rt2 bias2``, ``xw`` (0: none) and its direction stride (elements) and step / batch strides (rows of
``gt``), ``h0 c0`` (0: zeros) and their direction / batch strides, ``y`` (0: not wanted) and its step /
direction / batch strides, ``yh yc`` (0: not wanted) and theirs, ``scratch`` (per unit ``rpg`` rows of
``gt + gt2 + 3 * hp`` floats: gates of both phases, h, c, rh); then the units per chunk (written by the entry
point).
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import chunk_body, chunked_entry, internal_function
from ...codegen.loops import VECTORIZE, for_range
from ...codegen.mathfn import MathEmitter
from ...codegen.types import F32, I64, VOID
from ...codegen.vector import FP, VECP, VL, c64, cdiv, smin, splat, vector_intrinsics
from .abi import BLOCK, EXTRA, FIELDS, GRU_LINEAR, GRU_RESET, LSTM, RNN, SYMBOL

NB = BLOCK // VL
_F = {name: i for i, name in enumerate(FIELDS)}
# out, out_ld, bias, bias_ld, wt, ld, x, x_ld, kx, rt, h, h_ld, kh
BLOCK_TYPE = ir.FunctionType(VOID, [FP, I64, FP, I64, FP, I64, FP, I64, I64, FP, FP, I64, I64])
# a block's shape by the rows it takes: one row, 8 vectors (128 columns); 2-4 rows, 4 vectors (64 columns) each,
# so the accumulators (rows x vectors) stay within the 32 registers with the weights and the broadcasts
SHAPES = {1: 8, 2: 4, 3: 4, 4: 4}


def _accumulate(b: ir.IRBuilder, fn: ir.Function, fma, accs: list, count, row, values, name: str) -> list:
    """``accs[r][v] += values(k)[r] * row(k)[v*VL : (v+1)*VL]`` for ``k < count`` (a loop whose accumulators are
    phis, so they stay in registers; each weight vector loaded once for all rows); returns the accumulators."""
    entry = b.block
    head, body, done = (fn.append_basic_block(f"{name}.{part}") for part in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    k = b.phi(I64, f"{name}.k")
    k.add_incoming(c64(0), entry)
    phis = []
    for r, row_accs in enumerate(accs):
        phis.append([])
        for v, a in enumerate(row_accs):
            p = b.phi(a.type, f"{name}.acc{r}_{v}")
            p.add_incoming(a, entry)
            phis[r].append(p)
    b.cbranch(b.icmp_signed("<", k, count), body, done)
    b.position_at_end(body)
    wrow = row(k)
    w = [b.load(b.bitcast(b.gep(wrow, [c64(v * VL)]), VECP), align=4) for v in range(len(accs[0]))]
    for r, s in enumerate(values(k)):
        sv = splat(b, s)
        for v, p in enumerate(phis[r]):
            p.add_incoming(b.call(fma, [sv, w[v], p]), body)
    k.add_incoming(b.add(k, c64(1), flags=("nsw", "nuw")), body)
    b.branch(head)
    b.position_at_end(done)
    return phis


def _block(module: ir.Module, rows: int) -> ir.Function:
    """``cl_rnn.block<rows>(out, out_ld, bias, bias_ld, wt, ld, x, x_ld, kx, rt, h, h_ld, kh)``: for each row
    ``r < rows``, ``out[r][0:W] = bias[r] + x[r][0:kx] @ wt + h[r][0:kh] @ rt`` (``W = 16 * SHAPES[rows]``
    columns; rows of ``out``, ``bias``, ``x`` and ``h`` the ``*_ld`` floats apart, ``bias_ld`` 0 for one bias
    row; the rows of ``wt`` and ``rt`` ``ld`` floats apart)."""
    fn = internal_function(module, f"cl_rnn.block{rows}", BLOCK_TYPE, noalias=(0,))
    if not fn.is_declaration:
        return fn
    out, out_ld, bias, bias_ld, wt, ld, x, x_ld, kx, rt, h, h_ld, kh = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    fma = vector_intrinsics(module)[0]
    nb = SHAPES[rows]

    def at(ptr, ld_, r, col=None):
        p = b.gep(ptr, [b.mul(c64(r), ld_)])
        return p if col is None else b.bitcast(b.gep(p, [c64(col * VL)]), VECP)
    accs = [[b.load(at(bias, bias_ld, r, v), align=4) for v in range(nb)] for r in range(rows)]
    accs = _accumulate(b, fn, fma, accs, kx, lambda k: b.gep(wt, [b.mul(k, ld)]),
                       lambda k: [b.load(b.gep(at(x, x_ld, r), [k])) for r in range(rows)], "x")
    accs = _accumulate(b, fn, fma, accs, kh, lambda k: b.gep(rt, [b.mul(k, ld)]),
                       lambda k: [b.load(b.gep(at(h, h_ld, r), [k])) for r in range(rows)], "h")
    for r in range(rows):
        for v, a in enumerate(accs[r]):
            b.store(a, at(out, out_ld, r, v), align=4)
    b.ret_void()
    return fn


def _copy(b: ir.IRBuilder, src, dst, n, name: str) -> None:
    with for_range(b, 0, n, name, VECTORIZE) as j:
        b.store(b.load(b.gep(src, [j])), b.gep(dst, [j]))


def _emit_body(module: ir.Module) -> ir.Function:
    fn, b, f, per_chunk = chunk_body(module, f"{SYMBOL}.units", FIELDS)
    block = {rows: _block(module, rows) for rows in SHAPES}
    m = MathEmitter(b, module)
    seq, batch, inp, hidden, hp, gt, gt2, rpg = (f[k] for k in ("seq", "batch", "inp", "hidden", "hp", "gt", "gt2",
                                                                "rpg"))
    x, wt, rt, bias, rt2, bias2, xw, scratch = (b.inttoptr(f[k], FP)
                                                for k in ("x", "wt", "rt", "bias", "rt2", "bias2", "xw", "scratch"))
    has_xw = b.icmp_signed("!=", f["xw"], c64(0))
    zero, one = ir.Constant(F32, 0.0), ir.Constant(F32, 1.0)
    groups = cdiv(b, batch, rpg)
    units = b.mul(f["nd"], groups)
    u0 = b.mul(fn.args[1], per_chunk)

    def blocks(nrows, g, g_ld, first, first_ld, wt_d, ld, x0, x_ld, kx, rt_d, hv, h_ld, kh, cols):
        """The gates of ``nrows`` rows, ``cols`` columns, in blocks of BLOCK (``block<rows>`` calls)."""
        with for_range(b, 0, b.sdiv(cols, c64(BLOCK)), "blk") as k:
            for rows, nb in SHAPES.items():
                with b.if_then(b.icmp_signed("==", nrows, c64(rows))):
                    for half in range(0, BLOCK, nb * VL):
                        o = b.add(b.mul(k, c64(BLOCK)), c64(half))
                        b.call(block[rows], [b.gep(g, [o]), g_ld, b.gep(first, [o]), first_ld, b.gep(wt_d, [o]), ld,
                                             x0, x_ld, kx, b.gep(rt_d, [o]), hv, h_ld, kh])

    def cell_is(kind):
        return b.if_then(b.icmp_signed("==", f["cell"], c64(kind)))

    def gate(g, q, j):                                 # section q of a phase's gates, column j
        return b.load(b.gep(g, [b.add(b.mul(hp, c64(q)), j)]))

    def gru_update(z, hh, hj):                         # H = (1 - z) * hh + z * H
        b.store(b.fadd(b.fmul(b.fsub(one, z), hh), b.fmul(z, b.load(hj))), hj)

    with for_range(b, u0, smin(b, b.add(u0, per_chunk), units), "u") as u:
        d, n0 = b.sdiv(u, groups), b.mul(b.srem(u, groups), rpg)
        nrows = smin(b, rpg, b.sub(batch, n0))
        rev = b.icmp_signed("!=", b.and_(b.ashr(f["reverse"], d), c64(1)), c64(0))
        g = b.gep(scratch, [b.mul(b.mul(u, rpg), b.add(b.add(gt, gt2), b.mul(hp, c64(3))))])
        g2 = b.gep(g, [b.mul(rpg, gt)])
        h = b.gep(g2, [b.mul(rpg, gt2)])
        c = b.gep(h, [b.mul(rpg, hp)])
        rh = b.gep(c, [b.mul(rpg, hp)])

        def row(ptr, ld_, r):
            return b.gep(ptr, [b.mul(r, ld_)])
        wt_d, rt_d = b.gep(wt, [b.mul(d, b.mul(inp, gt))]), b.gep(rt, [b.mul(d, b.mul(hidden, gt))])
        bias_d, rt2_d, bias2_d = b.gep(bias, [b.mul(d, gt)]), b.gep(rt2, [b.mul(d, b.mul(hidden, gt2))]), \
            b.gep(bias2, [b.mul(d, gt2)])
        with for_range(b, 0, b.mul(b.mul(hp, c64(3)), rpg), "z", VECTORIZE) as j:
            b.store(zero, b.gep(h, [j]))
        with for_range(b, 0, nrows, "r0") as r:
            state_in = b.add(b.mul(d, f["i_ds"]), b.mul(b.add(n0, r), f["i_bs"]))
            for src, dst, name in ((f["h0"], h, "h0"), (f["c0"], c, "c0")):
                with b.if_then(b.icmp_signed("!=", src, c64(0))):
                    _copy(b, b.gep(b.inttoptr(src, FP), [state_in]), row(dst, hp, r), hidden, name)
        with for_range(b, 0, seq, "s") as s:
            t = b.select(rev, b.sub(b.sub(seq, c64(1)), s), s)
            x0 = b.gep(x, [b.add(b.mul(t, f["x_ts"]), b.mul(n0, f["x_bs"]))])
            # the input's part: the rows of this step's precomputed projection (bias included), or computed here
            xw_at = b.add(b.mul(d, f["xw_ds"]), b.mul(b.add(b.mul(t, f["xw_ts"]), b.mul(n0, f["xw_bs"])), gt))
            first = b.select(has_xw, b.gep(xw, [xw_at]), bias_d)
            first_ld = b.select(has_xw, b.mul(f["xw_bs"], gt), c64(0))
            blocks(nrows, g, gt, first, first_ld, wt_d, gt, x0, f["x_bs"], b.select(has_xw, c64(0), inp), rt_d, h, hp,
                   hidden, gt)
            with for_range(b, 0, nrows, "r") as r:
                gr, hr, cr, rhr, g2r = row(g, gt, r), row(h, hp, r), row(c, hp, r), row(rh, hp, r), row(g2, gt2, r)
                with cell_is(LSTM), for_range(b, 0, hidden, "j", VECTORIZE) as j:
                    gi, go, gf, gc = (gate(gr, q, j) for q in range(4))
                    cj = b.gep(cr, [j])
                    cn = b.fadd(b.fmul(m.sigmoid(gf), b.load(cj)), b.fmul(m.sigmoid(gi), m.tanh(gc)))
                    b.store(cn, cj)
                    b.store(b.fmul(m.sigmoid(go), m.tanh(cn)), b.gep(hr, [j]))
                with cell_is(GRU_LINEAR), for_range(b, 0, hidden, "j", VECTORIZE) as j:
                    hh = m.tanh(b.fadd(gate(gr, 2, j), b.fmul(m.sigmoid(gate(gr, 1, j)), gate(gr, 3, j))))
                    gru_update(m.sigmoid(gate(gr, 0, j)), hh, b.gep(hr, [j]))
                with cell_is(GRU_RESET), for_range(b, 0, hidden, "j", VECTORIZE) as j:
                    b.store(b.fmul(m.sigmoid(gate(gr, 1, j)), b.load(b.gep(hr, [j]))), b.gep(rhr, [j]))
                with cell_is(RNN), for_range(b, 0, hidden, "j", VECTORIZE) as j:
                    b.store(m.tanh(gate(gr, 0, j)), b.gep(hr, [j]))
            with cell_is(GRU_RESET):                  # second phase: (r * h) @ Rh^T for the group's rows
                blocks(nrows, g2, gt2, bias2_d, c64(0), rt2_d, gt2, rh, hp, c64(0), rt2_d, rh, hp, hidden, gt2)
                with for_range(b, 0, nrows, "r2") as r:
                    gr, hr, g2r = row(g, gt, r), row(h, hp, r), row(g2, gt2, r)
                    with for_range(b, 0, hidden, "j", VECTORIZE) as j:
                        hh = m.tanh(b.fadd(gate(gr, 2, j), b.load(b.gep(g2r, [j]))))
                        gru_update(m.sigmoid(gate(gr, 0, j)), hh, b.gep(hr, [j]))
            with b.if_then(b.icmp_signed("!=", f["y"], c64(0))), for_range(b, 0, nrows, "ry") as r:
                at = b.add(b.mul(t, f["y_ts"]), b.add(b.mul(d, f["y_ds"]), b.mul(b.add(n0, r), f["y_bs"])))
                _copy(b, row(h, hp, r), b.gep(b.inttoptr(f["y"], FP), [at]), hidden, "y")
        with for_range(b, 0, nrows, "rs") as r:
            state_out = b.add(b.mul(d, f["o_ds"]), b.mul(b.add(n0, r), f["o_bs"]))
            for dst, src, name in ((f["yh"], h, "yh"), (f["yc"], c, "yc")):
                with b.if_then(b.icmp_signed("!=", dst, c64(0))):
                    _copy(b, row(src, hp, r), b.gep(b.inttoptr(dst, FP), [state_out]), hidden, name)
    b.ret_void()
    return fn


def emit_rnn(module: ir.Module) -> ir.Function:
    """Defines ``cl_rnn_v1_f32(i8* desc, i64 nthreads)`` (see the module doc) in ``module``."""
    def units(b, d):                                   # (direction, group of batch rows) pairs
        def field(name):
            return b.load(b.gep(d, [c64(_F[name])]))
        return b.mul(field("nd"), cdiv(b, field("batch"), field("rpg")))
    return chunked_entry(module, SYMBOL, _emit_body(module), units, len(FIELDS), 1)


assert EXTRA == 1                         # units per chunk, written by the entry point
EMITTERS = {SYMBOL: emit_rnn}
