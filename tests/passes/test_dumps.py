"""passes/dumps: dump_as_text files, SVG pictures (well-formed XML), atomic writes."""
import os
import xml.etree.ElementTree as ET

import pytest
from graphkernel_testing import fuse_all, mul_add_relu

from converter_lite.passes.base import PassContext
from converter_lite.fileio import write_text as atomic_write_text
from converter_lite.passes.dumps import graph_svg, side_by_side, write_fusion_svgs, write_text_dumps

SVG = "{http://www.w3.org/2000/svg}"


def read(path):
    with open(path) as f:
        return f.read()


def texts(root):
    return [t.text for t in root.iter(SVG + "text")]


def test_graph_svg_is_well_formed_and_labels_nodes():
    root = ET.fromstring(graph_svg(mul_add_relu(), "before"))
    assert root.tag == SVG + "svg" and float(root.get("width")) > 0
    labels = texts(root)
    assert labels[0] == "before"
    for s in ("TestMul", "mul", "TestAdd", "TestRelu", "x", "output 0", "f32[2,3]"):
        assert s in labels
    # x -> mul -> add -> relu -> output: 4 edges (constants are not drawn)
    assert len(list(root.iter(SVG + "line"))) == 4
    assert len(list(root.iter(SVG + "rect"))) == 1 + 3                # background + 3 node boxes


def test_fused_kernel_box_lists_inner_ops():
    g = mul_add_relu()
    fuse_all(g, "fused_mul_add_relu")
    root = ET.fromstring(graph_svg(g))
    labels = texts(root)
    assert "GraphKernel fused_mul_add_relu" in labels
    assert "3 ops -> f32[2,3]" in labels
    assert "· TestMul  mul" in labels and "· TestRelu  relu" in labels
    assert [g_.get("class") for g_ in root.iter(SVG + "g")].count("fused") == 1


def test_rows_follow_topological_depth():
    root = ET.fromstring(graph_svg(mul_add_relu()))
    ys = {}
    for grp in root.iter(SVG + "g"):
        first = grp.find(SVG + "text")
        shape = grp.find(SVG + "rect")
        if first is not None and shape is not None:
            ys[first.text] = float(shape.get("y"))
    assert ys["TestMul"] < ys["TestAdd"] < ys["TestRelu"]


def test_labels_are_escaped():
    g = mul_add_relu()
    g.nodes[0].name = "a<b>&\"c\""
    root = ET.fromstring(graph_svg(g, title="<title>"))
    assert "a<b>&\"c\"" in texts(root) and "<title>" in texts(root)


def test_side_by_side_is_well_formed_with_both_pictures():
    before = graph_svg(mul_add_relu(), "before")
    g = mul_add_relu()
    fuse_all(g)
    after = graph_svg(g, "after")
    root = ET.fromstring(side_by_side(before, after))
    inner = root.findall(SVG + "svg")
    assert len(inner) == 2 and float(inner[1].get("x")) >= float(inner[0].get("width"))
    assert float(root.get("width")) == pytest.approx(float(inner[0].get("width")) + 40 + float(inner[1].get("width")))
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert len(ids) == len(set(ids))


def test_write_fusion_svgs(tmp_path):
    before = graph_svg(mul_add_relu(), "before")
    g = mul_add_relu()
    fuse_all(g)
    paths = write_fusion_svgs(before, g, str(tmp_path))
    assert [os.path.basename(p) for p in paths] == ["fusion_before.svg", "fusion_after.svg",
                                                    "fusion_before_after.svg"]
    for p in paths:
        ET.parse(p)
    with open(paths[0]) as before_f, open(paths[1]) as after_f:
        assert "GraphKernel" in after_f.read() and "GraphKernel" not in before_f.read()
    write_fusion_svgs(mul_add_relu(), g, str(tmp_path))             # a Graph is accepted for "before" too


def test_empty_graph_svg():
    from converter_lite.ir.core import Graph
    ET.fromstring(graph_svg(Graph("empty")))


def test_write_text_dumps(tmp_path):
    ctx = PassContext(config=None)
    ctx.record("graph_kernel_cluster.txt", "Source nodes of k0 = a\n  a\n=======================")
    ctx.record("graph_kernel_cluster.txt", "Source nodes of k1 = b\n")
    ctx.record("graph_kernel_split_mode.txt", "********** main graph: main **********")
    paths = write_text_dumps(ctx, str(tmp_path))
    d = tmp_path / "graph_kernel_dump"
    assert sorted(os.listdir(d)) == ["graph_kernel_cluster.txt", "graph_kernel_split_mode.txt"]
    assert (d / "graph_kernel_cluster.txt").read_text() == \
        "Source nodes of k0 = a\n  a\n=======================\nSource nodes of k1 = b\n"
    assert len(paths) == 2


@pytest.mark.parametrize("bad", ["../x.txt", "a/b.txt", "", ".."])
def test_write_text_dumps_rejects_paths(tmp_path, bad):
    ctx = PassContext(config=None)
    ctx.record(bad, "x")
    with pytest.raises(ValueError):
        write_text_dumps(ctx, str(tmp_path))


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path, monkeypatch):
    p = str(tmp_path / "sub" / "f.ir")
    atomic_write_text(p, "one")
    atomic_write_text(p, "two")
    assert read(p) == "two" and os.listdir(tmp_path / "sub") == ["f.ir"]

    def fail(*a):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        atomic_write_text(p, "three")
    assert read(p) == "two" and os.listdir(tmp_path / "sub") == ["f.ir"]
