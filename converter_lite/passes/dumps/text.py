"""``dump_as_text``: the text records passes left in ``ctx.records`` -> ``graph_kernel_dump/<file>``.

Passes call ``ctx.record("graph_kernel_cluster.txt", text)``; each file gets its records in order, each
ending with a newline (MindSpore writes e.g. "Source nodes of <kernel> = ..." blocks into
graph_kernel_cluster.txt and the split decisions into graph_kernel_split_mode.txt).
"""
from __future__ import annotations

import os

from ...fileio import write_text

DUMP_SUBDIR = "graph_kernel_dump"


def write_text_dumps(ctx, dump_dir: str) -> list[str]:
    """Writes every ``ctx.records`` file under ``<dump_dir>/graph_kernel_dump/``; returns the paths."""
    paths = []
    for file in sorted(ctx.records):
        if not file or os.path.basename(file) != file or file in (".", ".."):
            raise ValueError(f"dump record file name {file!r} must be a plain file name")
        body = "".join(r if r.endswith("\n") else r + "\n" for r in ctx.records[file])
        paths.append(write_text(os.path.join(dump_dir, DUMP_SUBDIR, file), body))
    return paths
