"""The numpy convolution path (runtime/fast/conv.py) with other steps sharing the plan's scratch area."""
import numpy as np
import onnx.helper as oh
from helpers import make_model, tensor_info

import converter_lite
def test_strided_conv_bias_survives_the_shared_scratch(tmp_path):
    """Found on YOLOv8n (nudenet's 320n.onnx) at opt_level 0: the im2col path wrote the row of ones that adds a
    strided Conv's bias into the plan's scratch once, at bind time, and the Conv before it overwrote it on every
    run (outputs off by up to 137).  The row is written on every run now."""
    import onnxruntime as ort
    rng = np.random.default_rng(9)
    inits = {"w1": (rng.standard_normal((16, 16, 3, 3)) * 0.2).astype(np.float32),
             "w2": (rng.standard_normal((32, 16, 3, 3)) * 0.2).astype(np.float32),
             "b2": rng.standard_normal(32).astype(np.float32)}
    m = make_model([oh.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
                    oh.make_node("Conv", ["a", "w2", "b2"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
                   [tensor_info("x", np.float32, [1, 16, 20, 20])], [tensor_info("y", np.float32, [1, 32, 10, 10])],
                   initializers=inits)
    x = rng.standard_normal((1, 16, 20, 20)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    model = converter_lite.load(converter_lite.convert(m, str(tmp_path / "c"), graph_kernel_flags="--opt_level=0"),
                                native=False)
    for _ in range(2):
        np.testing.assert_allclose(model.run({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
