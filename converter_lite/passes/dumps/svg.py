"""SVG pictures of a graph (pure string building, no graphviz), like the seeds' "before / after graph kernel
fusion" figures.

Layout: one row per topological depth (graph inputs at depth 0; a node sits one row below its deepest
producer; graph outputs in the last row), rows centred, nodes left to right in graph order.  Ordinary nodes
are boxes labelled with op, node name and output type; a fused ``GraphKernel`` node is an orange box listing
its inner ops; edges are straight arrows from producer to consumer.  Constants are not drawn.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from ...fileio import write_text
from ...ir.core import Graph, Node
from .text import DUMP_SUBDIR

CHAR_W = 7.2            # px per character at FONT_SIZE, monospace
FONT_SIZE = 12
LINE_H = 16
PAD = 8                 # inside a box
H_GAP = 24              # between boxes in a row
V_GAP = 40              # between rows
MARGIN = 20
TITLE_H = 28
MAX_LABEL = 40          # characters per label line
MAX_INNER_OPS = 16      # inner-op lines listed in a fused box
STYLE = {
    "io": ("#eeeeee", "#666666"),
    "node": ("#dbe9f6", "#2f6096"),
    "fused": ("#fde3c4", "#c0650a"),
}


@dataclass
class _Box:
    key: int
    lines: list[str]
    style: str
    depth: int
    shape: str = "rect"
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0
    preds: list[int] = field(default_factory=list)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def _node_lines(node: Node) -> tuple[list[str], str]:
    sub = node.attrs.get("graph")
    types = ", ".join(str(o.type) for o in node.outputs if o.type is not None)
    if node.op == "GraphKernel" and isinstance(sub, Graph):
        kernel = node.attrs.get("kernel_name") or node.name
        inner = [n.op + (f"  {n.name}" if n.name else "") for n in sub.nodes]
        shown = inner[:MAX_INNER_OPS]
        if len(inner) > MAX_INNER_OPS:
            shown.append(f"… +{len(inner) - MAX_INNER_OPS} more")
        lines = [f"GraphKernel {kernel}", f"{len(sub.nodes)} ops -> {types}", *("· " + s for s in shown)]
        return [_clip(s) for s in lines], "fused"
    return [_clip(s) for s in (node.op, node.name, types) if s], "node"


def _layout(graph: Graph) -> tuple[list[_Box], float, float]:
    boxes: list[_Box] = []
    depth_of: dict[int, int] = {}          # id(value) -> depth of its box
    box_of: dict[int, int] = {}            # id(value) -> index of its box
    for v in graph.inputs:
        box_of[id(v)], depth_of[id(v)] = len(boxes), 0
        boxes.append(_Box(len(boxes), [_clip(v.name), str(v.type)], "io", 0, "ellipse"))
    for node in graph.nodes:
        srcs = [v for v in node.inputs if v is not None and id(v) in box_of]
        depth = 1 + max((depth_of[id(v)] for v in srcs), default=0)
        lines, style = _node_lines(node)
        box = _Box(len(boxes), lines, style, depth, preds=list(dict.fromkeys(box_of[id(v)] for v in srcs)))
        for o in node.outputs:
            box_of[id(o)], depth_of[id(o)] = box.key, depth
        boxes.append(box)
    last = 1 + max((b.depth for b in boxes), default=0)
    for i, v in enumerate(graph.outputs):
        preds = [box_of[id(v)]] if id(v) in box_of else []
        boxes.append(_Box(len(boxes), [f"output {i}", _clip(v.name)], "io", last, "ellipse", preds=preds))

    rows: dict[int, list[_Box]] = {}
    for b in boxes:
        b.w = max(len(s) for s in b.lines) * CHAR_W + 2 * PAD + (24 if b.shape == "ellipse" else 0)
        b.h = len(b.lines) * LINE_H + 2 * PAD
        rows.setdefault(b.depth, []).append(b)
    row_w = {d: sum(b.w for b in r) + H_GAP * (len(r) - 1) for d, r in rows.items()}
    width = max(row_w.values(), default=0) + 2 * MARGIN
    y = MARGIN + TITLE_H
    for d in sorted(rows):
        x = (width - row_w[d]) / 2
        for b in rows[d]:
            b.x, b.y = x, y
            x += b.w + H_GAP
        y += max(b.h for b in rows[d]) + V_GAP
    return boxes, max(width, 240.0), y - V_GAP + MARGIN


def _box_svg(b: _Box) -> list[str]:
    fill, stroke = STYLE[b.style]
    out = [f'<g class="{b.style}">']
    if b.shape == "ellipse":
        out.append(f'<ellipse cx="{b.x + b.w / 2:.1f}" cy="{b.y + b.h / 2:.1f}" rx="{b.w / 2:.1f}" '
                   f'ry="{b.h / 2:.1f}" fill="{fill}" stroke="{stroke}"/>')
    else:
        out.append(f'<rect x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" rx="4" '
                   f'fill="{fill}" stroke="{stroke}"/>')
    for i, line in enumerate(b.lines):
        weight = ' font-weight="bold"' if i == 0 else ""
        anchor = 'text-anchor="middle"' if b.style != "fused" or i < 2 else 'text-anchor="start"'
        tx = b.x + b.w / 2 if "middle" in anchor else b.x + PAD
        ty = b.y + PAD + (i + 1) * LINE_H - 4
        out.append(f'<text x="{tx:.1f}" y="{ty:.1f}" {anchor}{weight}>{escape(line)}</text>')
    out.append("</g>")
    return out


def graph_svg(graph: Graph, title: str | None = None) -> str:
    """An SVG document (no XML declaration, so it can be nested) drawing ``graph``."""
    boxes, width, height = _layout(graph)
    title = title if title is not None else f"@{graph.name}"
    parts = [
        (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
         f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="{FONT_SIZE}">'),
        ('<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
         'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#444"/></marker></defs>'),
        '<rect width="100%" height="100%" fill="white"/>',
        (f'<text x="{MARGIN}" y="{MARGIN + 8}" font-size="{FONT_SIZE + 3}" font-weight="bold">'
         f'{escape(title)}</text>'),
        '<g class="edges" stroke="#444" fill="none">',
    ]
    for b in boxes:
        for p in b.preds:
            a = boxes[p]
            parts.append(f'<line x1="{a.x + a.w / 2:.1f}" y1="{a.y + a.h:.1f}" x2="{b.x + b.w / 2:.1f}" '
                         f'y2="{b.y:.1f}" marker-end="url(#arrow)"/>')
    parts.append("</g>")
    for b in boxes:
        parts.extend(_box_svg(b))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


_SIZE = re.compile(r'<svg\b[^>]*?\bwidth="([\d.]+)"[^>]*?\bheight="([\d.]+)"')


def side_by_side(left: str, right: str, gap: float = 40) -> str:
    """Two SVG documents from ``graph_svg`` placed left and right in one SVG document."""
    (lw, lh), (rw, rh) = (tuple(float(x) for x in _SIZE.search(s).groups()) for s in (left, right))
    width, height = lw + gap + rw, max(lh, rh)
    placed = left.replace("<svg ", '<svg x="0" y="0" ', 1)
    shifted = right.replace("<svg ", f'<svg x="{lw + gap:.0f}" y="0" ', 1)
    # marker ids must be unique in one document
    shifted = shifted.replace('id="arrow"', 'id="arrow_r"').replace("url(#arrow)", "url(#arrow_r)")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n'
            f'{placed}{shifted}</svg>\n')


def write_fusion_svgs(before: str | Graph, after: str | Graph, dump_dir: str) -> list[str]:
    """Writes ``graph_kernel_dump/fusion_before.svg``, ``fusion_after.svg`` and both side by side in
    ``fusion_before_after.svg``.  ``before``/``after`` are graphs or SVG text from ``graph_svg`` (the
    optimizer renders "before" up front because it rewrites the graph in place).  Returns the paths."""
    def render(g: str | Graph, when: str) -> str:
        return g if isinstance(g, str) else graph_svg(g, f"{g.name}: {when} graph kernel fusion")
    left, right = render(before, "before"), render(after, "after")
    out = os.path.join(dump_dir, DUMP_SUBDIR)
    return [write_text(os.path.join(out, name), text)
            for name, text in (("fusion_before.svg", left), ("fusion_after.svg", right),
                               ("fusion_before_after.svg", side_by_side(left, right)))]


__all__ = ["graph_svg", "side_by_side", "write_fusion_svgs"]
