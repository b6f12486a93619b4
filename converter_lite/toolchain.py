"""The converter side the runtime may need, handed to it by ``converter_lite.load`` (the runtime imports none of
the converter: a deployment that only runs models needs numpy, not onnx, llvmlite or a C compiler).

* ``jit(ll_text, driver_symbols)``: compiles a model's kernel IR in memory for this host, with the drivers it
  names re-emitted from kernels/ (a CPU lacking the recorded features, or ``trust_native_code=False``);
* ``regenerate(graph, num_threads)``: native sections made again from the graph's own fused sub-graphs and
  recorded drivers (IR only, for ``jit``), when the shipped machine code is not trusted;
* ``reconvert(source, spec, shapes, work_dir)``: converts a model's embedded ONNX source again for other sizes of
  its dynamic dims (runtime/respecialize.py).
"""
from __future__ import annotations

from .kernels.registry import emitters
from .pipeline import reconvert  # noqa: F401


def jit(ll_text: str, driver_symbols) -> object:
    from .codegen.jit import jit_library

    return jit_library(ll_text, emitters(driver_symbols))


def regenerate(graph, num_threads: int) -> dict[str, bytes]:
    from .codegen import build_kernels
    from .ops.graph_kernel import kernel_entry
    from .passes.select_drivers import recorded_drivers

    kernels = [kernel_entry(n) for g in graph.all_graphs() for n in g.nodes
               if n.op == "GraphKernel"]
    drivers = recorded_drivers(graph)
    if not kernels and not drivers:
        return {}
    bundle = build_kernels(kernels, target=None, cache_dir="", num_threads_hint=num_threads,
                           drivers=emitters(drivers), on_unsupported="skip", link=False)
    return bundle.sections
