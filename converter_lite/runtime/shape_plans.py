"""One plan per input shape of a model with dynamic dims, made at run time without compiling anything.

A model converted without ``--inputShape`` for its dynamic dims has a graph whose values computed from the
dynamic inputs have unknown shapes (ir/input_dims.py).  At the first run with a new tuple of input shapes,
``ShapePlans.plan_for`` makes the graph static for them (concretize.py: type inference and shape arithmetic)
and builds a ``Plan`` of it (its arena planned and sized for those shapes, its kernels bound with their tiling
chosen for them); later runs with the same shapes reuse it.  The plans' arenas and scratch areas are carved out
of one grow-only block (shared_arena.py), so a new shape no smaller than one seen before costs no fresh memory.
The most recently used ``MAX_PLANS`` plans are kept, fewer when their arenas would total more than
``MAX_BYTES`` (a bound on what a run at each could need); ``Model.resize`` builds one ahead of the first run.

What a new shape costs is shape inference and binding (Python, no compiler, no llvmlite): 5-10 ms for a small
transformer, far more than a run at a small shape (30 us - 1 ms).  So a model whose generic plan is cheap
(``generic_ok``: its fused kernels run native at any shape, and it has no convolution, pooling, resize or
recurrence, which run on numpy there) runs a shape the first time it sees it on that generic plan (1-3 ms for
the transformers of ``make bench``), and builds the shape's plan when the shape comes again (``first_sight``): a
stream of ever-new sequence lengths pays no planning, a repeated shape gets its plan.  A model whose first runs
are planned (convolutions) builds a plan at small shapes when it loads (``warm_up``), which packs its weights
then rather than in its first run.  The first and second runs at a shape are measured in ``make bench`` against
the steady runs.

A plan for a new shape can take little from the plans before it: at a new width (the recogniser) or image
size (YOLOv8n) every node sees new input shapes, and 1 of the recogniser's 22 folds (3 of YOLOv8n's 52) sees
inputs it saw at another shape, so memoising nodes or folds by their inputs would not pay.  What the plans share
is what does not depend on the shapes, made once: the packed weights (kernels/packing.py), each Conv's and
pool's window geometry (ops/nn_window.py), each driver's address (``NativeLibrary.support``), and what
concretize finds of each node whatever the shapes (``_facts``: static or not, which folds can apply, which
drivers to re-select among; made by ``warm_up`` at load).  The rest is per-node Python kept lean (no ``np.prod``
of a small shape, no set of CPU features per Conv, no sorted copy of the placed buffers per buffer, ...).
Planning and binding the recogniser at 1x3x48x77 (the minimum over 25 first runs, 3 series): concretize 3.07
-> 2.43 ms, lower 2.95 -> 2.15, memory 0.53 -> 0.43, bind 2.41 -> 2.14, in all 9.7 -> 7.8 ms; YOLOv8n at
1x3x320x320: concretize 4.82 -> 3.99, lower 5.11 -> 3.97, memory 0.58 -> 0.46, bind 2.22 -> 2.06, in all 13.8 ->
11.3 ms.

The cyclic garbage collector is paused while a plan is built (``_collector_paused``): building one allocates
tens of thousands of objects, none of them garbage, and in a process holding many objects the collections this
triggered (a full one now and then) added 3-9 ms to a first run of 6-13 ms (bert_dynamic in ``make bench``).
The ~5,000 objects a plan keeps are then moved to the oldest generation at once (``gc.freeze`` + ``unfreeze``:
two list splices, no traversal; skipped when the process froze objects itself), so the young collections that
follow do not walk them (0.5 ms for the recogniser's plan) and they add nothing to the count that triggers a
full collection; objects the process made before the plan wait for the next full collection.
"""
from __future__ import annotations

import gc
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from contextlib import contextmanager

from ..ir.core import Graph
from .concretize import concretize
from .shared_arena import SharedArena

# ops whose run on the generic plan (dynamic shapes: reference numpy kernels, nothing pre-bound) costs far more
# than on a plan made for the shape: a model holding one never runs a new shape on the generic plan
HEAVY_GENERIC = frozenset({
    "Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool", "AveragePool", "GlobalAveragePool",
    "GlobalMaxPool", "LpPool", "GlobalLpPool", "MaxUnpool", "Resize", "Upsample", "GridSample", "RoiAlign",
    "DepthToSpace", "SpaceToDepth", "LSTM", "GRU", "RNN", "Loop", "Scan", "If", "SequenceMap", "Col2Im",
    "NonMaxSuppression", "Einsum", "DeformConv"})
SEEN_ONCE = 64                  # shapes remembered as run once (on the generic plan)
# the generic plan allocates every intermediate per run and runs its GEMMs on one thread: beyond this many
# elements in some dynamic input (tokens of a transformer) the shape's plan, built at once, costs less than the
# generic run's excess (bert_dynamic at 4x256: generic 34 ms, planned 8.4 ms; at 1x128 generic 8 ms, 1.1 ms)
GENERIC_MAX_ELEMENTS = 512
MAX_PLANS = 8                   # plans kept for the most recently used input shapes
MAX_BYTES = 1 << 30             # and at most this much arena memory among them (the most recent plan always kept)


class ShapePlans:
    def __init__(self, graph: Graph, dynamic: list[str], make_plan: Callable[[Graph, SharedArena], object],
                 max_plans: int = MAX_PLANS, max_bytes: int = MAX_BYTES):
        self.graph = graph
        self.dynamic = dynamic                       # names of the dynamic inputs, graph-input order
        self._make_plan = make_plan
        self._plans: OrderedDict[tuple, object] = OrderedDict()
        self._lock = threading.Lock()
        self.max_plans, self.max_bytes = max_plans, max_bytes
        self.built = 0                               # plans made so far (a test and a bench figure)
        self.arena = SharedArena()
        self._seen: OrderedDict[tuple, None] = OrderedDict()
        # what concretize finds of each node whatever the shapes (concretize._node_facts): one entry per node of
        # the graph (and of the If branches it inlines), filled by the first plan (``warm_up``, at load)
        self._facts: dict = {}

    def plan_for(self, shapes: tuple[tuple[int, ...], ...]):
        """The plan for ``shapes`` (one shape per dynamic input, in ``dynamic`` order), made on first use."""
        with self._lock:
            plan = self._plans.get(shapes)
            if plan is not None:
                self._plans.move_to_end(shapes)
                return plan
        with _collector_paused():
            plan = self._make_plan(concretize(self.graph, dict(zip(self.dynamic, shapes)), facts=self._facts), self.arena)
        with self._lock:
            self.built += 1
            self._plans[shapes] = plan
            self._plans.move_to_end(shapes)
            while len(self._plans) > self.max_plans or (len(self._plans) > 1 and self._bytes() > self.max_bytes):
                self._plans.popitem(last=False)
        return plan

    def warm_up(self, shapes: tuple, inputs: list) -> bool:
        """Builds a plan for ``shapes`` and runs it on ``inputs`` once, keeping neither: the weights it packed
        stay packed for every later plan (kernels/packing.py), its code paths have run.  A model of fixed
        shapes does this work at load; a model with dynamic dims does it here, at load, at small shapes the
        converter found it admits (``warm_shapes`` metadata, passes/fuse/dynamic.py), instead of in its first
        run.  False when the model rejects them (the first run then pays)."""
        from ..errors import ConverterError
        try:
            with _collector_paused():
                plan = self._make_plan(concretize(self.graph, dict(zip(self.dynamic, shapes)), facts=self._facts), self.arena)
                plan.execute(inputs)
            return True
        except (ConverterError, ValueError, TypeError, IndexError, ArithmeticError):
            return False

    def first_sight(self, shapes: tuple) -> bool:
        """True the first time ``shapes`` (no plan yet, no input over ``GENERIC_MAX_ELEMENTS`` elements) is
        asked for: that run may take the generic plan (``generic_ok``), and the plan for the shapes is built when
        they come again."""
        if any(math.prod(s) > GENERIC_MAX_ELEMENTS for s in shapes):
            return False
        with self._lock:
            if shapes in self._plans or shapes in self._seen:
                return False
            self._seen[shapes] = None
            while len(self._seen) > SEEN_ONCE:
                self._seen.popitem(last=False)
            return True

    def _bytes(self) -> int:
        return sum(getattr(p, "arena_bytes", 0) + getattr(p, "workspace", 0) for p in self._plans.values())

    def cached(self) -> list[tuple]:
        with self._lock:
            return list(self._plans)


@contextmanager
def _collector_paused():
    """The cyclic garbage collector off for the block (as it was before afterwards): see the module doc."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if not gc.get_freeze_count():
                # the objects made meanwhile (the plan: long-lived) go straight to the oldest generation, an O(1)
                # list move, instead of being traversed by the next collections on their way there
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def generic_ok(plan) -> bool:
    """Whether ``plan`` (the plan of the graph with its dynamic shapes, built at load) is cheap enough to run a
    shape seen for the first time: every fused kernel runs native (row and column kernels take their shapes at
    run time) and no op is in ``HEAVY_GENERIC``.  Transformers qualify (GEMMs on numpy's BLAS, fused kernels
    native, shape arithmetic in numpy); convolutional models do not."""
    return all(s.impl.native or (s.node.op != "GraphKernel" and s.node.op not in HEAVY_GENERIC)
               for s in plan.program.steps) and not plan.body_plans()
