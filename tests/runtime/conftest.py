"""Fixtures shared by the runtime tests."""
import pytest
from helpers import all_drivers_library


class SupportResolver:
    """A plan resolver with no fused kernels that carries a library of every native driver (GEMM, convolutions,
    resize) for the fast kernels to use; the graphs planned with it record their drivers first
    (``helpers.record_drivers``), as converted graphs do."""

    def __init__(self, library):
        self.library = library

    def __call__(self, node):
        return None


@pytest.fixture(scope="module")
def resolver():
    return SupportResolver(all_drivers_library())
