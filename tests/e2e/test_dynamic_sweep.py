"""Every sample and zoo model with all its input dims made dynamic (each a named symbol, value_info dropped, as
an export with dynamic axes everywhere) converts without --inputShape and matches onnxruntime at its original
shape: the optimizer's passes and the dynamic fusion never assume a static shape where there is none."""
import glob
import os

import numpy as np
import onnx
import pytest
from helpers import assert_close, run_ort

import converter_lite

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = sorted(glob.glob(os.path.join(ROOT, "models", "*.onnx")) + glob.glob(os.path.join(ROOT, "models", "zoo", "*.onnx")))


def _all_dynamic(path: str) -> tuple[onnx.ModelProto, dict]:
    m = onnx.load(path)
    inits = {t.name for t in m.graph.initializer}
    shapes = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = [d.dim_value for d in dims]
        for k, d in enumerate(dims):
            if d.dim_value > 0:
                d.dim_param = f"{vi.name}_s{k}"
    del m.graph.value_info[:]
    return m, shapes


@pytest.mark.parametrize("path", MODELS, ids=lambda p: os.path.basename(p)[:-5])
def test_all_dims_dynamic(path, tmp_path):
    proto, shapes = _all_dynamic(path)
    if any(d == 0 for s in shapes.values() for d in s):
        pytest.skip("the model's own inputs are dynamic: no shape to compare at")
    model = converter_lite.load(converter_lite.convert(proto, str(tmp_path / "m"),
                                                       graph_kernel_flags="--opt_level=2"))
    rng = np.random.default_rng(0)
    feeds = {}
    for i in onnx.load(path).graph.input:
        if i.name not in shapes:
            continue
        elem = i.type.tensor_type.elem_type
        if elem == onnx.TensorProto.FLOAT:
            feeds[i.name] = rng.random(shapes[i.name], np.float32)
        elif elem == onnx.TensorProto.BOOL:
            feeds[i.name] = np.ones(shapes[i.name], bool)
        else:
            feeds[i.name] = rng.integers(0, 20, shapes[i.name]).astype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    if "max_len" in feeds:
        feeds["max_len"] = np.array(12, np.int64)
    want = run_ort(onnx.load(path), feeds)
    for got, w in zip(model.run(feeds).values(), want):
        assert_close(np.asarray(got), w, rtol=1e-4, atol=1e-4, what=os.path.basename(path))
