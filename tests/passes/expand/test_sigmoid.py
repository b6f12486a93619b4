import numpy as np
import pytest
from helpers import single_op_model

from .expand_testing import expand_and_compare

CASES = [
    ("Sigmoid", {}, 21),
    ("HardSigmoid", {}, 21),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 21),
    ("HardSwish", {}, 21),
    ("Softplus", {}, 21),
    ("Mish", {}, 21),
    ("Softsign", {}, 21),
    ("Swish", {}, 24),
    ("Swish", {"alpha": 1.7}, 24),
]


@pytest.mark.parametrize("op,attrs,opset", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_sigmoid_family(rng, op, attrs, opset):
    x = (rng.standard_normal((3, 5, 7)) * 4).astype(np.float32)
    x.flat[:4] = [0.0, -30.0, 30.0, 3.0]          # zero, saturated ends, HardSwish's kink
    expand_and_compare(single_op_model(op, {"x": x}, opset=opset, **attrs), {"x": x}, gone=[op])
