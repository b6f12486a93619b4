import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def tap_depthwise(monkeypatch):
    """Depthwise Convs expand into fused tap kernels even where the native depthwise driver would run them
    (passes/expand/depthwise_conv.native_driver_runs): for tests of the expansion itself."""
    from converter_lite.passes.expand import depthwise_conv
    monkeypatch.setattr(depthwise_conv, "native_driver_runs", lambda *args: False)
