"""Diagnostic dumps of the graph-kernel optimizer (all writes atomic: temp file + os.replace).

* ``write_text_dumps``: ``dump_as_text`` records -> ``<dump_dir>/graph_kernel_dump/<file>``;
* ``graph_svg`` / ``write_fusion_svgs``: pictures of the graph before and after fusion.
"""
from .atomic import atomic_write_text
from .svg import graph_svg, side_by_side, write_fusion_svgs
from .text import DUMP_SUBDIR, write_text_dumps

__all__ = [
           "DUMP_SUBDIR",
           "atomic_write_text",
           "graph_svg",
           "side_by_side",
           "write_fusion_svgs",
           "write_text_dumps",
]
