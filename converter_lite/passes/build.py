"""``graph_kernel_build``: every fused kernel -> native code (LLVM via llvmlite), one shared object per model.

1. Record on every node the hand-written drivers it may run on (select_drivers.py) and on every fused kernel
   a convolution driver computes in its epilogue, the Conv it folds into (conv_epilogue.py); collect the
   GraphKernel nodes of the main graph and of every control-flow body (one shared object for the model; a
   kernel name taken by an outer graph gets a suffix).  A graph with none still gets a shared object when some node
   recorded a driver.
2. Kernels the code generator cannot lower (an op without an emitter) stay interpreted; each is logged with
   the op at fault.
3. ``codegen.build_kernels`` lowers, optimises for the target (``cpu_arch``/``cpu_type``/``cpu_feature``,
   default the host) and links them; the shared object, the LLVM IR and the target fingerprint go into
   ``ctx.artifacts`` and from there into the ``.ms`` file.  Only the recorded drivers are linked.
4. With ``dump_as_text``: each kernel's LLVM IR and assembly as ``graph_kernel_dump/<kernel>.ll`` / ``.s``.
"""
from __future__ import annotations

import time

from ..ir.core import Graph
from ..kernels.registry import emitters
from .base import Pass, PassContext
from ..ops.graph_kernel import kernel_entry
from .conv_epilogue import assign_conv_epilogues
from .registry import register_pass
from .select_drivers import recorded_drivers, select_drivers


@register_pass
class GraphKernelBuild(Pass):
    name = "graph_kernel_build"
    whole_model = True

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        from .. import codegen  # llvmlite is loaded only when a model is actually built

        graphs = graph.all_graphs()
        kernels = _unique_kernel_names([n for g in graphs for n in g.nodes if n.op == "GraphKernel"])
        # a model without fused kernels still gets a shared object for its heavy ops' drivers (kernels/)
        drivers = any([bool(select_drivers(g)) for g in graphs])
        if not kernels and not drivers:
            return False
        ctx.count("graph_kernel_build/conv_epilogues", sum(assign_conv_epilogues(g) for g in graphs))
        cfg = ctx.config
        target = {"cpu_arch": cfg.cpu_arch, "cpu_type": cfg.cpu_type, "cpu_feature": cfg.cpu_feature}
        todo = []
        for node in kernels:
            reason = codegen.unsupported_reason(node.attrs["graph"], node.attrs["kernel_name"])
            if reason:
                ctx.log.info("kernel %s stays interpreted: %s", node.attrs["kernel_name"], reason)
                ctx.count("graph_kernel_build/interpreted")
            else:
                todo.append(kernel_entry(node))
        if not todo and not drivers:
            return False
        t0 = time.perf_counter()
        linked = recorded_drivers(graph)
        bundle = codegen.build_kernels(todo, target=target, cache_dir=cfg.kernel_cache_dir,
                                       num_threads_hint=cfg.num_threads_hint, drivers=emitters(linked),
                                       on_unsupported="skip")
        for name, why in bundle.skipped.items():
            ctx.log.info("kernel %s stays interpreted: %s", name, why)
            ctx.count("graph_kernel_build/interpreted")
        ctx.artifacts.update(bundle.sections)
        ctx.count("graph_kernel_build/native", len(bundle.specs))
        ctx.count("graph_kernel_build/drivers", len(linked))
        ctx.count("graph_kernel_build/compiled", int(bundle.stats.get("compiled", 0)))
        ctx.count("graph_kernel_build/compile_us", int((time.perf_counter() - t0) * 1e6))
        if cfg.dump_as_text:
            for name, sub, *_ in todo:
                if name in bundle.specs:
                    ll, asm = _kernel_text(codegen, sub, target, name, cfg)
                    ctx.record(f"{name}.ll", ll)
                    ctx.record(f"{name}.s", asm)
        return False    # the graph itself is unchanged; the native code rides along in ctx.artifacts


def _unique_kernel_names(kernels: list) -> list:
    """Gives every kernel a symbol of its own: bodies name their kernels independently of the main graph."""
    taken: set[str] = set()
    for node in kernels:
        name, k = node.attrs["kernel_name"], 1
        while name in taken:
            name = f"{node.attrs['kernel_name']}_b{k}"
            k += 1
        taken.add(name)
        node.attrs["kernel_name"] = name
    return kernels


def _kernel_text(codegen, graph, target, name, cfg) -> tuple[str, str]:
    try:
        return codegen.kernel_assembly(graph, target, name=name, num_threads_hint=cfg.num_threads_hint)
    except Exception as e:   # a dump must never fail a conversion
        return f"; IR unavailable: {e}", f"# assembly unavailable: {e}"
