import numpy as np
import pytest
from helpers import single_op_model

from .expand_testing import expand_and_compare


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(rng, approximate):
    x = (rng.standard_normal((4, 33)) * 3).astype(np.float32)
    model = single_op_model("Gelu", {"x": x}, opset=20, approximate=approximate)
    graph = expand_and_compare(model, {"x": x}, gone=["Gelu"])
    assert ("Erf" in graph.op_counts()) == (approximate == "none")
    assert "Tanh" not in graph.op_counts()          # tanh form: x / (1 + exp(-2u))
    assert ("Exp" in graph.op_counts()) == (approximate == "tanh")
