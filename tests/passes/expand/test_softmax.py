import numpy as np
import pytest
from helpers import single_op_model

from .expand_testing import expand_and_compare


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(rng, op, axis):
    x = (rng.standard_normal((3, 5, 6)) * 5).astype(np.float32)
    graph = expand_and_compare(single_op_model(op, {"x": x}, axis=axis), {"x": x}, gone=[op])
    assert graph.op_counts()["ReduceMax"] == 1 and graph.op_counts()["ReduceSum"] == 1
