"""Model.run from several threads at once, and several processes loading one .ms at once."""
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import converter_lite

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _convert(tmp_path, name, level=2):
    return converter_lite.convert(os.path.join(ROOT, "models", f"{name}.onnx"), str(tmp_path / name),
                                  graph_kernel_flags=f"--opt_level={level}")


def test_run_from_many_threads_gives_each_caller_its_own_result(tmp_path):
    model = converter_lite.load(_convert(tmp_path, "attention_block"))
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((1, 64, 128)).astype(np.float32),
              "mask": np.zeros((1, 1, 1, 64), np.float32)} for _ in range(8)]
    expected = [model.run(f)["y"] for f in feeds]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(3):
            results = list(pool.map(lambda f: model.run(f)["y"], feeds))
            for got, want in zip(results, expected):
                # BLAS may split a concurrent matmul differently (last-bit differences); a shared buffer
                # between callers would give wholly wrong rows
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_two_processes_load_the_same_file_at_once(tmp_path):
    ms = _convert(tmp_path, "conv_net")
    script = ("import sys, numpy as np, converter_lite\n"
              "m = converter_lite.load(sys.argv[1])\n"
              "x = np.linspace(-1, 1, 3 * 32 * 32, dtype=np.float32).reshape(1, 3, 32, 32)\n"
              "print(float(m.run({'x': x})['y'].sum()))\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, ms], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(out.strip())
    assert len(set(outs)) == 1
