"""model/pages.py: releasing the resident pages of the memory-mapped .ms file (load-time checksum, weights
packed into copies) drops only whole pages of a read-only file mapping, and never changes a value."""
from __future__ import annotations

import mmap
import subprocess
import sys

import numpy as np
import onnx.helper as oh
import pytest

from converter_lite.model import pages
from tests.helpers import make_model, tensor_info


def _resident_kib(mm: mmap.mmap) -> int:
    """Rss of the mapping that holds ``mm`` (from /proc/self/smaps)."""
    start = np.frombuffer(mm, np.uint8).ctypes.data
    rss, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= start < hi
            elif inside and head == "Rss:":
                rss += int(line.split()[1])
    return rss


@pytest.fixture
def mapped(tmp_path):
    data = np.arange(1 << 20, dtype=np.float32)                       # 4 MiB
    path = tmp_path / "blob"
    path.write_bytes(data.tobytes())
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return mm, data                  # (views of it outlive the test body: the mapping closes when collected)


def test_releases_whole_pages_of_a_file_mapping_and_keeps_values(mapped):
    mm, data = mapped
    arr = np.frombuffer(memoryview(mm)[100:], np.float32, count=(1 << 20) - 25)     # starts inside a page
    assert float(arr.sum(dtype=np.float64)) == float(data[25:].sum(dtype=np.float64))
    before = _resident_kib(mm)
    released = pages.release(arr)
    span = arr.nbytes
    assert span - 2 * mmap.PAGESIZE < released <= span and released % mmap.PAGESIZE == 0
    assert _resident_kib(mm) <= before - released // 1024 + 8
    np.testing.assert_array_equal(arr, data[25:])                     # mapped in again, same values
    view = arr[1000:7000].reshape(60, 100)                           # views of views are found too
    assert pages.release(view) > 0 and pages.release(memoryview(mm)[:10]) == 0     # < one whole page


def test_leaves_everything_else_alone(mapped):
    mm, data = mapped
    owned = data.copy()
    assert pages.release(owned) == 0 and pages.release(np.zeros(0, np.float32)) == 0
    assert pages.release(memoryview(bytearray(1 << 16))) == 0
    strided = np.frombuffer(mm, np.float32)[::2]
    assert pages.release(strided) == 0
    np.testing.assert_array_equal(owned, data)


def test_packed_weights_are_not_resident_twice(tmp_path):
    """Eight chained MatMuls with 4 MiB of weights each: loading packs them into GEMM panels and gives the file's
    pages back, so the peak of a load and a run stays near one copy of the weights (it was two: the checksum and
    the packing paged the whole file in, and the panels are a second copy)."""
    import converter_lite
    rng = np.random.default_rng(0)
    ws = {f"w{i}": (rng.standard_normal((1024, 1024)) / 32).astype(np.float32) for i in range(8)}
    nodes = [oh.make_node("MatMul", ["x" if i == 0 else f"h{i - 1}", f"w{i}"], [f"h{i}" if i < 7 else "y"])
             for i in range(8)]
    model = make_model(nodes, [tensor_info("x", np.float32, [4, 1024])], [tensor_info("y", np.float32, [4, 1024])],
                       ws)
    src = tmp_path / "mm.onnx"
    src.write_bytes(model.SerializeToString())
    out = converter_lite.convert(str(src), str(tmp_path / "mm"), graph_kernel_flags="--opt_level=2")
    total = sum(w.nbytes for w in ws.values())
    x = rng.standard_normal((4, 1024)).astype(np.float32)
    want = x
    for i in range(8):
        want = want @ ws[f"w{i}"]
    np.save(tmp_path / "x.npy", x)
    # a fresh process (as make bench measures): memory an earlier load freed would be re-used unseen
    code = (f"import numpy as np, converter_lite, converter_lite.runtime.model\n"
            f"from converter_lite.cli.memory import RssPeak\n"
            f"x = np.load({str(tmp_path / 'x.npy')!r})\n"
            f"peak = RssPeak().start()\n"
            f"y = converter_lite.load({out!r}, num_threads=1).run({{'x': x}})['y']\n"
            f"np.save({str(tmp_path / 'y.npy')!r}, y)\n"
            f"print(peak.method, peak.peak_bytes())\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-3, atol=1e-3)
    method, peak = res.stdout.split()
    if method != "VmHWM":
        pytest.skip("the peak-RSS counter cannot be reset here")
    assert int(peak) < 1.6 * total, (int(peak), total)      # measured 1.27 (2.15 with the pages kept)
