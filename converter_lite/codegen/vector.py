"""Vector helpers shared by the hand-written native drivers (kernels/*/emit.py): 16-lane float32 vectors (one
AVX-512 register; two AVX2 registers where the target lacks AVX-512), their intrinsics, splats, clamps, a
register transpose, integer helpers and the epilogue-flag dispatch (residual add, then a clamp or a gate).  Emitting through them generates the same IR
as the drivers' own copies did."""
from __future__ import annotations

from llvmlite import ir

from .types import F32, I1, I32, I64, VOID

VL = 16                            # lanes of the drivers' float32 vectors
FLAG_CLAMP, FLAG_RESIDUAL, FLAG_GATE = 1, 2, 4   # the convolution microkernels' epilogue flags
# the ``clamp`` word of the convolution drivers' records: what follows the residual add (kernels/conv_epilogue.py)
MODE_NONE, MODE_CLAMP, MODE_GATE = 0, 1, 2
FP = F32.as_pointer()
VEC = ir.VectorType(F32, VL)
VECP = VEC.as_pointer()
MASK = ir.VectorType(I1, VL)
I64P = I64.as_pointer()


def c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def smin(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def cdiv(b, x, y):
    return b.sdiv(b.add(x, b.sub(y, c64(1))), y)


def clamp_lanes(b: ir.IRBuilder, v: ir.Value, lov: ir.Value, hiv: ir.Value) -> ir.Value:
    """``v`` clamped to [lov, hiv] lane by lane, NaN staying NaN (ordered compares are false for it)."""
    v = b.select(b.fcmp_ordered("<", v, lov), lov, v)
    return b.select(b.fcmp_ordered(">", v, hiv), hiv, v)


def gate_lanes(b: ir.IRBuilder, v: ir.Value, av: ir.Value, bv: ir.Value) -> ir.Value:
    """``v * min(max(v * a + b, 0), 1)`` lane by lane (HardSwish with a = 1/6, b = 1/2); NaN stays NaN."""
    zero, one = ir.Constant(VEC, [0.0] * VL), ir.Constant(VEC, [1.0] * VL)
    return b.fmul(v, clamp_lanes(b, b.fadd(b.fmul(v, av), bv), zero, one))


def _no_act(b, v, lov, hiv):
    return v


# the activations of the epilogue, by flag: (block name, flag, emit(b, v, lo_or_a, hi_or_b))
ACTS = (("n", 0, _no_act), ("c", FLAG_CLAMP, clamp_lanes), ("g", FLAG_GATE, gate_lanes))


def epilogue_flags(b: ir.IRBuilder, mode: ir.Value, has_res: ir.Value) -> ir.Value:
    """The flags word of a driver record's ``clamp`` word (MODE_*) and residual presence."""
    act = b.select(b.icmp_signed("==", mode, c64(MODE_CLAMP)), c64(FLAG_CLAMP),
                   b.select(b.icmp_signed("==", mode, c64(MODE_GATE)), c64(FLAG_GATE), c64(0)))
    return b.or_(act, b.select(has_res, c64(FLAG_RESIDUAL), c64(0)))


def splat(b: ir.IRBuilder, s: ir.Value) -> ir.Value:
    one = b.insert_element(ir.Constant(VEC, None), s, ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(VEC, None), ir.Constant(ir.VectorType(I32, VL), [0] * VL))


def splat_i32(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """``v`` (an integer) truncated to i32 in every lane of a VL-lane vector."""
    ty = ir.VectorType(I32, VL)
    one = b.insert_element(ir.Constant(ty, None), b.trunc(v, I32), ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(ty, None), ir.Constant(ty, [0] * VL))


def splat_bool(b: ir.IRBuilder, flag: ir.Value) -> ir.Value:
    ty = ir.VectorType(I1, VL)
    one = b.insert_element(ir.Constant(ty, None), flag, ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(ty, None), ir.Constant(ir.VectorType(I32, VL), [0] * VL))


def transpose(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """The VL x VL transpose of ``rows`` (VL vectors) by log2(VL) butterfly stages of two-source shuffles."""
    rows = list(rows)
    step = 1
    while step < VL:
        lo = [l if not l & step else VL + l - step for l in range(VL)]
        hi = [l + step if not l & step else VL + l for l in range(VL)]
        out = list(rows)
        for i in range(VL):
            if i & step:
                continue
            j = i | step
            out[i] = b.shuffle_vector(rows[i], rows[j], ir.Constant(ir.VectorType(I32, VL), lo))
            out[j] = b.shuffle_vector(rows[i], rows[j], ir.Constant(ir.VectorType(I32, VL), hi))
        rows = out
        step *= 2
    return rows


def vector_intrinsics(module: ir.Module):
    def get(name, fnty):
        fn = module.globals.get(name)
        return fn if fn is not None else ir.Function(module, fnty, name)
    fma = get("llvm.fmuladd.v16f32", ir.FunctionType(VEC, [VEC, VEC, VEC]))
    mload = get("llvm.masked.load.v16f32.p0v16f32", ir.FunctionType(VEC, [VECP, I32, MASK, VEC]))
    mstore = get("llvm.masked.store.v16f32.p0v16f32", ir.FunctionType(VOID, [VEC, VECP, I32, MASK]))
    return fma, mload, mstore


def flag_versions(fn: ir.Function, b: ir.IRBuilder, flags: ir.Value, emit) -> None:
    """Branches from ``b`` on the epilogue ``flags`` (FLAG_RESIDUAL, and FLAG_CLAMP or FLAG_GATE) to one
    straight-line block per combination, filled by ``emit(builder, residual_on, act, exit_block)`` (which applies
    ``act(builder, v, lov, hiv)`` to each vector after the residual and ends with a branch to ``exit_block``),
    and leaves ``b`` at the exit block.  With the flags as selects instead, every output vector paid a residual
    load, an add and a clamp even when they were off."""
    exit_block = fn.append_basic_block("epi.exit")
    blocks = {}
    for res_on in (False, True):
        for name, _, act in ACTS:
            blk = blocks[res_on, name] = fn.append_basic_block(f"epi.r{int(res_on)}{name}")
            emit(ir.IRBuilder(blk), res_on, act, exit_block)
    has_res = b.icmp_signed("!=", b.and_(flags, c64(FLAG_RESIDUAL)), c64(0))
    with_res, no_res = fn.append_basic_block("epi.res"), fn.append_basic_block("epi.nores")
    b.cbranch(has_res, with_res, no_res)
    for blk, res_on in ((with_res, True), (no_res, False)):
        b.position_at_end(blk)
        act = b.and_(flags, c64(FLAG_CLAMP | FLAG_GATE))
        sw = b.switch(act, blocks[res_on, "n"])
        for name, flag, _ in ACTS[1:]:
            sw.add_case(c64(flag), blocks[res_on, name])
    b.position_at_end(exit_block)


def tap_loop_head(b: ir.IRBuilder, head: ir.Block, entry: ir.Block, init: dict) -> tuple[ir.Value, dict]:
    """Branches from ``entry`` to ``head`` and emits there the loop counter (from 0) and one accumulator phi per
    key of ``init`` (starting at its value, of its type); the body adds the incoming values."""
    b.branch(head)
    b.position_at_end(head)
    k = b.phi(I64, "k")
    k.add_incoming(c64(0), entry)
    accs = {}
    for key, start in init.items():
        phi = b.phi(start.type, "acc" + "_".join(map(str, key)))
        phi.add_incoming(start, entry)
        accs[key] = phi
    return k, accs
