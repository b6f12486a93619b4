"""Diagnostic dumps of the graph-kernel optimizer (all writes atomic: temp file + os.replace).

* ``write_text_dumps``: ``dump_as_text`` records -> ``<dump_dir>/graph_kernel_dump/<file>``;
* ``graph_svg`` / ``write_fusion_svgs``: pictures of the graph before and after fusion.
"""
from .svg import graph_svg, side_by_side, write_fusion_svgs
from .text import DUMP_SUBDIR, write_text_dumps

__all__ = [
           "DUMP_SUBDIR",
           "graph_svg",
           "side_by_side",
           "write_fusion_svgs",
           "write_text_dumps",
]
