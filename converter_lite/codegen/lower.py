"""Lowering: a fused sub-graph -> LLVM functions that evaluate it, one *stage* at a time.

Plan (``plan_kernel``):
1. Every graph input, graph output and reduction result gets a buffer; nothing else is materialized.
2. Each reduction node is a stage (reduce.py) writing its buffer (the graph output if it is one, else a temp).
3. The graph outputs not written by a reduction are computed by map stages, one per output shape: a loop over
   the output's index space evaluates the expression tree of each output element, reading inputs, constants and
   reduction buffers through index maps (index.py: broadcast, reshape, transpose, slice, concat, ...).
   A map stage whose expression is a same-shape elementwise chain (scalars may broadcast) uses one flat loop
   over the linear offset - the fast path LLVM vectorizes best; other map stages use a loop nest.
Within one loop body, a value is emitted once per index (memoized), so x*sigmoid(x) reads x once.
The innermost loop of a nest carries loop hints chosen from the strides of its accesses (loops.access_hints:
short contiguous loops widened with a masked tail rather than fully unrolled, long ones interleaved); flat
stages writing more than STREAM_BYTES use non-temporal stores (_emit_flat_streaming).

Emission (``emit_stages``): each stage is an internal function ``<sym>.sN(bufs..., lo, hi)`` with ``noalias``
buffer pointers that computes the range ``[lo, hi)`` of the stage's partition axis; schedule.py calls the
stages (on one thread or a team), abi.py adds the exported entry point.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
from llvmlite import ir

from ..ir.core import Graph, Value
from ..ir.dtype import DType
from .errors import UnsupportedOpError
from .index import (
    INDEX_MAPS,
    RESHAPE_LIKE,
    Index,
    _numel,
    one_row_block,
    transpose_perm,
)
from .interior import emit_split_nest, pad_guards
from .loops import access_hints, for_range, interior_hints, loop_nest
from .mathfn import MathEmitter
from .reduce import (
    REDUCE_OPS,
    ReduceStage,
    acc_dtype,
    emit_reduce,
    lowerable,
    reduce_axes,
)
from .reuse import plan_reuse, plan_stored_first
from .scalar import SCALAR_EMITTERS, NoEmitterError, ScalarCall
from .stages import FLAT_ALIGN, Buffer, KernelPlan, MapStage, storage_type_size  # noqa: F401
from .types import (
    I64,
    VOID,
    UnsupportedDTypeError,
    compute_type,
    constant,
    round_to_dtype,
    storage_constant,
    storage_type,
    to_compute,
    to_storage,
)

STREAM_BYTES = 32 << 20  # flat stages writing at least this many bytes use non-temporal stores (_emit_flat_streaming)
STREAM_VEC = 16          # elements per non-temporal vector store (one AVX-512 register of float32)
STREAM_LOOP = {"llvm.loop.vectorize.enable": True, "llvm.loop.vectorize.width": STREAM_VEC,
               "llvm.loop.unroll.disable": None}
# columns per block of a map nest whose innermost loop gathers along a transposed axis (_emit_map): narrow blocks
# when the gathered elements are at least FAR_GATHER_BYTES apart
TRANSPOSE_BLOCK, TRANSPOSE_BLOCK_FAR, FAR_GATHER_BYTES = 64, 16, 2048
SHORT_INNER = 128        # innermost extents below this: widened with a masked tail (loops.access_hints)


def check_supported(graph: Graph, kernel: str = "") -> None:
    """Raises UnsupportedOpError naming the first op (or dtype) that has no native lowering."""
    for v in list(graph.inputs) + list(graph.outputs):
        _check_dtype(v, "graph I/O", kernel)
    for node in graph.nodes:
        if node.op not in SCALAR_EMITTERS and node.op not in INDEX_MAPS and node.op not in REDUCE_OPS:
            raise UnsupportedOpError(node.op, kernel)
        for v in list(node.inputs) + list(node.outputs):
            if v is not None:
                _check_dtype(v, node.op, kernel)
        if node.op in REDUCE_OPS and len(node.inputs) > 1 and node.inputs[1] is not None \
                and node.inputs[1].const is None:
            raise UnsupportedOpError(node.op, kernel, "reduction axes are computed at run time")
        if node.op in REDUCE_OPS and not lowerable(node.op, node.inputs[0].dtype):
            raise UnsupportedOpError(node.op, kernel, f"not lowered for {node.inputs[0].dtype.name}")
        if node.op == "Slice" and any(v is not None and v.const is None for v in node.inputs[1:]):
            raise UnsupportedOpError(node.op, kernel, "slice bounds are computed at run time")


def _check_dtype(v: Value, op: str, kernel: str) -> None:
    if v.type is None:
        raise UnsupportedOpError(op, kernel, f"value {v.name!r} has no type")
    try:
        storage_type(v.dtype)
    except UnsupportedDTypeError as e:
        raise UnsupportedOpError(op, kernel, str(e)) from None


def plan_kernel(graph: Graph) -> KernelPlan:
    plan = KernelPlan(graph)

    def new_buffer(dtype, shape, kind):
        buf = Buffer(len(plan.buffers), dtype, tuple(shape), kind)
        plan.buffers.append(buf)
        return buf

    for v in graph.inputs:
        plan.value_buf.setdefault(id(v), new_buffer(v.dtype, v.shape, "input"))
    out_bufs = [new_buffer(v.dtype, v.shape, "output") for v in graph.outputs]
    temps: list[tuple] = []
    for node in graph.nodes:
        if node.op not in REDUCE_OPS:
            continue
        axes = reduce_axes(node)
        v = node.outputs[0]
        dst = next((ob for o, ob in zip(graph.outputs, out_bufs) if o is v), None)
        if dst is None:
            temps.append((v.dtype, v.shape))
            dst = Buffer(-1, v.dtype, v.shape, "temp")
            plan.buffers.append(dst)
        st = ReduceStage(node, axes, dst)
        if not st.inner and acc_dtype(v.dtype) is not v.dtype:
            st.acc = Buffer(-1, acc_dtype(v.dtype), v.shape, "temp")
            plan.buffers.append(st.acc)
        plan.value_buf[id(v)] = dst
        plan.stages.append(st)
    # temps go last so that slots of inputs and outputs are the ABI argument positions
    plan.buffers.sort(key=lambda b: {"input": 0, "output": 1, "temp": 2}[b.kind])
    for i, b in enumerate(plan.buffers):
        b.slot = i
    groups: dict[tuple[int, ...], list] = {}
    for v, ob in zip(graph.outputs, out_bufs):
        if plan.value_buf.get(id(v)) is ob:
            continue
        src = _unreshaped(plan, v)
        groups.setdefault(tuple(src.shape), []).append((src, ob))
    for shape, items in groups.items():
        flat = all(_flat_ok(plan, v, _numel(shape)) for v, _ in items)
        plan.stages.append(MapStage(shape, items, flat))
    plan_stored_first(plan, list(zip(graph.outputs, out_bufs)))
    plan_reuse(plan)
    return plan


def _unreshaped(plan: KernelPlan, v: Value) -> Value:
    """``v`` without the reshapes it ends with: a reshape keeps the row-major layout, so the map stage can loop
    over the shape before them and store each element at its linear offset in ``v``'s buffer.  Looping over a
    reshaped shape instead made every element's coordinates come from divisions of the flat index (PoolFormer's
    pooling kernel, which ends in GroupNorm's flattening Reshape: its Pad guards were evaluated per element,
    0.80 ms where the same kernel without the Reshape takes 0.06)."""
    while (v.producer is not None and v.producer.op in RESHAPE_LIKE and id(v) not in plan.value_buf
           and v.producer.inputs[0] is not None and _numel(v.producer.inputs[0].shape) == _numel(v.shape)):
        v = v.producer.inputs[0]
    return v


def _flat_ok(plan: KernelPlan, root: Value, size: int) -> bool:
    """True when every element of ``root`` can be computed from its linear offset alone (no broadcast but
    of scalars, no index map but reshapes).  Iterative, each value visited once."""
    stack, seen = [root], set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        n = _numel(v.shape)
        if n != size and n != 1:
            return False
        if id(v) in plan.value_buf or v.const is not None or n == 1:
            continue
        node = v.producer
        if node is None:
            return False
        if node.op in RESHAPE_LIKE:
            stack.append(node.inputs[0])
        elif node.op in SCALAR_EMITTERS:
            stack.extend(i for i in node.inputs if i is not None)
        else:
            return False
    return True


class StageEmitter:
    """Emits values of the kernel graph at indices, inside one stage function."""

    def __init__(self, module: ir.Module, fn: ir.Function, plan: KernelPlan, ptrs: list[ir.Value], kernel: str,
                 consts: dict[int, ir.GlobalVariable], features: frozenset[str] = frozenset()):
        self.module = module
        self.consts = consts
        self.fn = fn
        self.plan = plan
        self.ptrs = ptrs
        self.kernel = kernel
        self.entry = fn.append_basic_block("entry")
        self.b = ir.IRBuilder(self.entry)
        self.math = MathEmitter(self.b, module, ldexp="avx512f" in features)
        self._memo: list[dict] = [{}]
        self.cached: dict[int, Buffer] = {}       # values of this stage read from a buffer (reuse.py)
        self.free_guards: frozenset = frozenset()  # constant-Pad guards known to hold here (interior.py)
        self.known_pieces: dict = {}               # id(Concat) -> the input read all over this loop region

    # -- helpers used by index.py and reduce.py ------------------------------------------------------------
    @contextlib.contextmanager
    def memo_scope(self) -> Iterator[None]:
        """Values emitted inside the scope (a loop body or a branch) are forgotten when it ends."""
        self._memo.append({})
        try:
            yield
        finally:
            self._memo.pop()

    def alloca_entry(self, ty: ir.Type) -> ir.Value:
        with self.b.goto_block(self.entry):
            self.b.position_at_start(self.entry)
            return self.b.alloca(ty)

    @staticmethod
    def compute_type(v: Value) -> ir.Type:
        return compute_type(v.dtype)

    def _addr(self, buf: Buffer, idx: Index) -> ir.Value:
        ptr = self.ptrs[buf.slot]
        if buf.numel == 1:
            return ptr
        return self.b.gep(ptr, [idx.linear()], inbounds=True)

    def load_compute(self, buf: Buffer, idx: Index) -> ir.Value:
        return to_compute(self.b, self.b.load(self._addr(buf, idx)), buf.dtype)

    def store_compute(self, buf: Buffer, idx: Index, v: ir.Value) -> None:
        self.b.store(to_storage(self.b, v, buf.dtype), self._addr(buf, idx))

    # -- values ----------------------------------------------------------------------------------------------
    def _lookup(self, key) -> ir.Value | None:
        for level in reversed(self._memo):
            if key in level:
                return level[key]
        return None

    def buffered(self, v: Value) -> bool:
        """Whether ``v`` is read from a buffer (a kernel input or output, or stored by an earlier stage)."""
        return id(v) in self.cached or id(v) in self.plan.value_buf

    def value_at(self, v: Value, idx: Index) -> ir.Value:
        """The scalar of ``v`` at ``idx`` (compute type), emitted once per index in the current scope."""
        key = (id(v), idx.key())
        val = self._lookup(key)
        if val is not None:
            return val
        # emit the elementwise operands first, deepest first, so the recursion below stays shallow however
        # long the fused chain is (index maps are emitted when reached, and prefetch their own operands)
        for u, ui in self._operands_post_order(v, idx):
            self.value_at(u, ui)
        val = self._emit(v, idx)
        self._memo[-1][key] = val
        return val

    def _operands_post_order(self, v: Value, idx: Index) -> list[tuple[Value, Index]]:
        order, stack, seen = [], [(v, idx, False)], set()
        while stack:
            u, ui, expanded = stack.pop()
            if expanded:
                order.append((u, ui))
                continue
            key = (id(u), ui.key())
            if key in seen or self._lookup(key) is not None:
                continue
            seen.add(key)
            stack.append((u, ui, True))
            node = u.producer
            if id(u) in self.plan.value_buf or id(u) in self.cached or u.const is not None or node is None \
                    or node.op not in SCALAR_EMITTERS:
                continue
            for i in node.inputs:
                if i is not None:
                    stack.append((i, ui.broadcast_to(i.shape), False))
        return order[:-1]                       # v itself is emitted by the caller

    def _emit(self, v: Value, idx: Index) -> ir.Value:
        buf = self.cached.get(id(v)) or self.plan.value_buf.get(id(v))
        if buf is not None:
            return self.load_compute(buf, idx)
        if v.const is not None:
            return self._const_at(v, idx)
        node = v.producer
        if node is None:
            raise UnsupportedOpError("?", self.kernel, f"value {v.name!r} is neither an input nor computed")
        if node.op in INDEX_MAPS:
            return INDEX_MAPS[node.op](self, node, v, idx)
        args = [None if i is None else self.value_at(i, idx.broadcast_to(i.shape)) for i in node.inputs]
        while args and args[-1] is None:
            args.pop()
        if self._row_divisor(node, v):           # x / s(row) -> x * (1/s): LICM hoists 1/s out of the row loop
            recip = self.b.fdiv(ir.Constant(args[1].type, 1.0), args[1])
            return round_to_dtype(self.b, self.b.fmul(args[0], recip), v.dtype)
        sc = ScalarCall(self.b, self.math, node, [i.dtype if i is not None else None for i in node.inputs],
                        v.dtype, [_scalar_const(i) for i in node.inputs])
        try:
            out = SCALAR_EMITTERS[node.op](sc, *args)
        except NoEmitterError as e:
            raise UnsupportedOpError(node.op, self.kernel, str(e)) from None
        if out.type != compute_type(v.dtype):
            raise UnsupportedOpError(node.op, self.kernel,
                                     f"emitter produced {out.type} for a {v.dtype.name} result")
        return round_to_dtype(self.b, out, v.dtype)

    def _row_divisor(self, node, v: Value) -> bool:
        """A float Div whose divisor is a reduction result constant along the innermost axis (Softmax)."""
        if node.op != "Div" or v.dtype not in (DType.float32, DType.float64) or len(node.inputs) != 2:
            return False
        y = node.inputs[1]
        buf = self.plan.value_buf.get(id(y))
        return (buf is not None and buf.kind != "input" and y.dtype is v.dtype and node.inputs[0].dtype is v.dtype
                and len(y.shape) == len(v.shape) > 0 and y.shape[-1] == 1 and v.shape[-1] > 1)

    def _const_at(self, v: Value, idx: Index) -> ir.Value:
        s = _scalar_const(v)
        if s is not None:
            return constant(v.dtype, s)
        gv = self._const_global(v)
        ptr = self.b.gep(gv, [ir.Constant(I64, 0), idx.broadcast_to(v.shape).linear()], inbounds=True)
        return to_compute(self.b, self.b.load(ptr), v.dtype)

    def _const_global(self, v: Value) -> ir.GlobalVariable:
        """A private constant array holding ``v`` (one per constant per module)."""
        consts = self.consts
        if id(v) not in consts:
            data = np.asarray(v.const).reshape(-1)
            ety = storage_type(v.dtype)
            aty = ir.ArrayType(ety, len(data))
            gv = ir.GlobalVariable(self.module, aty, f"cst.{len(consts)}")
            gv.global_constant = True
            gv.linkage = "private"
            gv.initializer = ir.Constant(aty, [storage_constant(v.dtype, x) for x in data.tolist()])
            consts[id(v)] = gv
        return consts[id(v)]


def _scalar_const(v: Value | None):
    """The Python scalar of a constant whose elements are all equal, else None."""
    if v is None or v.const is None:
        return None
    a = np.asarray(v.const)
    if a.size == 0:
        return None
    first = a.reshape(-1)[0]
    if a.size > 1 and not np.array_equal(a, np.full_like(a, first), equal_nan=a.dtype.kind == "f"):
        return None
    return first.item()


# -- stage functions -----------------------------------------------------------------------------------------
def _stage_function(module: ir.Module, plan: KernelPlan, name: str) -> tuple[ir.Function, list[ir.Value]]:
    params = [storage_type(b.dtype).as_pointer() for b in plan.buffers] + [I64, I64]
    fn = ir.Function(module, ir.FunctionType(VOID, params), name)
    fn.linkage = "internal"
    for a in fn.args[:-2]:
        a.add_attribute("noalias")
    return fn, list(fn.args[:-2])


def _emit_flat(em: StageEmitter, st: MapStage, lo: ir.Value, hi: ir.Value) -> None:
    with for_range(em.b, lo, hi, "i") as i, em.memo_scope():
        idx = Index(em.b, st.shape, linear=i)
        for v, buf in st.items:
            em.store_compute(buf, idx, em.value_at(v, idx))


def _emit_flat_streaming(em: StageEmitter, st: MapStage, lo: ir.Value, hi: ir.Value) -> None:
    """A flat stage whose outputs are far larger than the caches: whole vectors of STREAM_VEC elements are written
    with non-temporal stores (no read-for-ownership of lines that are overwritten anyway: 2 memory streams
    instead of 3, as memcpy does), then a fence.  The outputs need not be 64-byte aligned, only equally
    misaligned (one output, or several of one element size at the same offset in their lines): the elements
    before the first 64-byte boundary of ``[lo, hi)`` and the tail take the ordinary loop.  A caller's output
    array (IO binding) is typically 16-byte aligned: storing it with ordinary stores cost the 4096 x 4096
    ``Model.run(outputs=)`` of make bench 1.28x np.copyto's time against 0.90x with fresh (aligned) outputs."""
    b = em.b
    i64 = lambda v: ir.Constant(I64, v)
    sizes = {storage_type_size(buf.dtype) for _, buf in st.items}
    if len(sizes) != 1:
        _emit_flat(em, st, lo, hi)
        return
    size = sizes.pop()
    addrs = [b.ptrtoint(em.ptrs[buf.slot], I64) for _, buf in st.items]
    offset = b.and_(addrs[0], i64(63))
    ok = b.icmp_signed("==", b.srem(offset, i64(size)), i64(0))
    for addr in addrs[1:]:
        ok = b.and_(ok, b.icmp_signed("==", b.and_(addr, i64(63)), offset))
    # elements from lo to the first 64-byte boundary of the outputs
    line = b.and_(b.add(offset, b.mul(lo, i64(size))), i64(63))
    peel = b.sdiv(b.and_(b.sub(i64(64), line), i64(63)), i64(size))
    start = b.select(b.icmp_signed("<", b.add(lo, peel), hi), b.add(lo, peel), hi)
    nt = em.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
    with b.if_else(ok) as (then, otherwise):
        with then:
            _emit_flat(em, st, lo, start)
            vec = i64(STREAM_VEC)
            nvec = b.sdiv(b.sub(hi, start), vec)
            with for_range(b, i64(0), nvec, "v") as j:
                base = b.add(start, b.mul(j, vec))
                with for_range(b, 0, STREAM_VEC, "l", STREAM_LOOP) as k, em.memo_scope():
                    idx = Index(b, st.shape, linear=b.add(base, k))
                    for v, buf in st.items:
                        val = to_storage(b, em.value_at(v, idx), buf.dtype)
                        store = b.store(val, b.gep(em.ptrs[buf.slot], [idx.linear()], inbounds=True),
                                        align=min(64, STREAM_VEC * size))
                        store.set_metadata("nontemporal", nt)
            _emit_flat(em, st, b.add(start, b.mul(nvec, vec)), hi)
            b.fence("seq_cst")                  # orders the non-temporal stores before the pool's barrier
        with otherwise:
            _emit_flat(em, st, lo, hi)


def _emit_map(em: StageEmitter, st: MapStage, lo: ir.Value, hi: ir.Value) -> None:
    b = em.b
    if st.flat:
        if sum(buf.nbytes for _, buf in st.items) >= STREAM_BYTES:
            _emit_flat_streaming(em, st, lo, hi)
            return
        _emit_flat(em, st, lo, hi)
        return
    p = st.part_axis
    extents = [(lo, hi) if d == p else (0, n) for d, n in enumerate(st.shape)]

    def body(coords):
        with em.memo_scope():
            idx = Index(b, st.shape, coords)
            for v, buf in st.items:
                em.store_compute(buf, idx, em.value_at(v, idx))

    guards = pad_guards([v for v, _ in st.items], st.shape,
                        lambda v: id(v) in em.cached or id(v) in em.plan.value_buf)
    cuts = guards.cuts(st.shape)
    t = _block_axes(em, st) if cuts and not guards.ranges else 0
    if t and max(cuts) < len(st.shape) - t:
        # a Concat along a leading axis (YOLOv8's channel Concats): its cuts split the leading loops, the
        # trailing block stays one loop (below)
        lead = len(st.shape) - t
        count = _numel(st.shape[lead:])
        zero = ir.Constant(I64, 0)
        emit_split_nest(em, extents[:lead] + [(0, count)], guards, tuple(st.shape[:lead]) + (count,),
                        lambda coords: body(list(coords[:lead]) + [zero] * (t - 1) + [coords[-1]]),
                        lambda n, inside: _inner_hints(st, count))
        return
    repeat = _inner_repeat(em, st) if p != len(st.shape) - 1 else 1
    if guards.ranges or cuts or repeat > 1:
        emit_split_nest(em, extents, guards, st.shape, body, lambda n, inside: _inner_hints(st, n, inside),
                        repeat)
        return
    last = len(st.shape) - 1
    gather = _gather_bytes(em, st) if p is not None and p < last else 0
    block = TRANSPOSE_BLOCK_FAR if gather >= FAR_GATHER_BYTES else TRANSPOSE_BLOCK
    if gather and st.shape[last] > block:
        # the innermost loop gathers along a transposed axis: blocks of columns outermost, so the lines one row's
        # gathers touch are still in cache for the next rows (each line serves 16 of them).  Gathers at least
        # FAR_GATHER_BYTES apart take narrow blocks (their lines share a few cache sets: 64 lines 16 KB apart
        # overflowed L2's ways), the others wide ones (each row's stores then cover 4 lines: rows 16 KB apart
        # stored one line each were a cache miss per line).  Add + Transpose [1, 4096, 128] -> [1, 128, 4096]:
        # 923 -> 192 us (onnxruntime 354); Transpose [1, 128, 4096] -> [1, 4096, 128]: 923 -> 243 (398)
        nblk = -(-st.shape[last] // block)
        with for_range(b, 0, nblk, "tb") as blk:
            j0 = b.mul(blk, ir.Constant(I64, block))
            j1 = b.add(j0, ir.Constant(I64, block))
            j1 = b.select(b.icmp_signed("<", j1, ir.Constant(I64, st.shape[last])), j1,
                          ir.Constant(I64, st.shape[last]))
            with loop_nest(b, extents[:last] + [(j0, j1)], "d", _inner_hints(st, block)) as coords:
                body(coords)
        return
    t = _block_axes(em, st)
    if t:
        # the trailing block as one loop: per-channel operands (BatchNorm, an SE scale) broadcast over it, so
        # its offsets are linear (index.one_row_block); the innermost loop over a 28-wide row vectorized 16 +
        # a tail of 12.  BatchNorm -> SiLU over [1, 240, 28, 28], one thread: 74 -> 50 us (onnxruntime 42)
        lead = len(st.shape) - t
        count = _numel(st.shape[lead:])
        zero = ir.Constant(I64, 0)
        with loop_nest(b, extents[:lead] + [(0, count)], "d", _inner_hints(st, count)) as coords:
            body(list(coords[:lead]) + [zero] * (t - 1) + [coords[-1]])
        return
    with loop_nest(b, extents, "d", _inner_hints(st)) as coords:
        body(coords)


MAX_REPEAT = 4            # nearest upsampling factors along the innermost axis emitted as interleaved stores,
MIN_REPEATED = 16         # when the source row has at least this many elements (a vector of them; shorter ones
                          # gathered: YOLOv8n's 10 -> 20 upsampling was slower split)


def _inline_producers(em: StageEmitter, st: MapStage, through=lambda node: True):
    """(value, its producer) for every value ``st`` computes on the fly, depth first from its items: computed,
    neither a constant nor a cached value, and not read from a buffer (a graph output's is recomputed); the walk
    goes on through the inputs of the nodes ``through`` accepts."""
    bufs = em.plan.value_buf
    stack, seen = [v for v, _ in st.items], set()
    while stack:
        v = stack.pop()
        node = v.producer
        if id(v) in seen or node is None or v.const is not None or id(v) in em.cached:
            continue
        seen.add(id(v))
        yield v, node
        if through(node):
            stack.extend(i for i in node.inputs if i is not None and i.type is not None and
                         (id(i) not in bufs or bufs[id(i)].kind == "output"))


def _inner_repeat(em: StageEmitter, st: MapStage) -> int:
    """The factor ``r`` by which ``st`` repeats elements along its innermost axis, when its values read an Expand
    of a size-1 last axis to ``r`` (the Resize expander's nearest upsampling: Reshape -> Expand -> Reshape), else
    1.  Only a loop shape for emit_split_nest (any ``r`` dividing the axis is correct): a byte upsampling read at
    ``c // 2`` per element was gathered a byte at a time (YOLOv8n FULL_QUANT's 128 x 20 x 20 -> 40 x 40 Resize
    and Concat, ~60 us)."""
    n = st.shape[-1] if st.shape else 1
    for v, node in _inline_producers(em, st, through=lambda node: node.op != "Transpose"):
        if node.op == "Expand" and len(v.shape) > len(st.shape) and node.inputs[0].shape and \
                node.inputs[0].shape[-1] == 1 and 1 < v.shape[-1] <= MAX_REPEAT and n % v.shape[-1] == 0 and \
                n // v.shape[-1] >= MIN_REPEATED:
            return int(v.shape[-1])
    return 1


def _block_axes(em: StageEmitter, st: MapStage) -> int:
    """How many trailing axes (at least 2, after the partition axis) a map stage runs as one loop, or 0."""
    rank, p = len(st.shape), st.part_axis
    if p is None:
        return 0
    for t in range(rank - p - 1, 1, -1):
        if one_row_block(em, [v for v, _ in st.items], st.shape, rank - t)[0]:
            return t
    return 0


def _gather_bytes(em: StageEmitter, st: MapStage) -> int:
    """The largest input stride (bytes) along which ``st`` reads its output's last axis through a Transpose
    (the innermost loop then gathers: one cache line per lane), or 0 when it reads none that way."""
    stride = 0
    for _, node in _inline_producers(em, st):
        if node.op == "Transpose":
            src = node.inputs[0].shape
            perm = transpose_perm(node, len(src))
            if perm and perm[-1] != len(perm) - 1:
                stride = max(stride, _numel(src[perm[-1] + 1:]) * storage_type_size(node.inputs[0].dtype))
    return stride


def _inner_hints(st: MapStage, extent: int | None = None, interior: bool = False):
    """Loop hints of a loop nest's innermost loop (loops.access_hints) of ``extent`` iterations (default: the
    whole axis): short extents (depthwise convolutions over small images) widened with a masked tail instead of
    fully unrolled (which lets LLVM widen the outer loop with gathers and scatters), long ones interleaved;
    transposed accesses left to LLVM; ``interior``: the interior of a window (loops.interior_hints)."""
    if len(st.shape) < 2 or st.shape[-1] <= 1:
        return None
    n = st.shape[-1] if extent is None else extent
    return (interior_hints if interior else access_hints)(n, SHORT_INNER)


def emit_stages(module: ir.Module, plan: KernelPlan, sym: str, kernel: str = "",
                features: frozenset[str] = frozenset()) -> list[ir.Function]:
    """Emits one internal function ``<sym>.sK(bufs..., lo, hi)`` per stage of ``plan``; ``features`` are the
    target CPU's (LLVM names), for the few choices that depend on them (MathEmitter's ``ldexp``)."""
    stage_fns = []
    consts: dict[int, ir.GlobalVariable] = {}
    for k, st in enumerate(plan.stages):
        fn, ptrs = _stage_function(module, plan, f"{sym}.s{k}")
        em = StageEmitter(module, fn, plan, ptrs, kernel, consts, features)
        lo, hi = fn.args[-2], fn.args[-1]
        body = fn.append_basic_block("body")
        em.b.branch(body)
        em.b.position_at_end(body)
        if isinstance(st, ReduceStage):
            em.cached = st.cached
            emit_reduce(em, st, lo, hi)
        else:
            em.cached = st.cached
            _emit_map(em, st, lo, hi)
        em.b.ret_void()
        stage_fns.append(fn)
    return stage_fns


