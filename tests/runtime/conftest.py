"""Fixtures shared by the runtime tests."""
import pytest

from converter_lite.codegen import build_kernels
from converter_lite.runtime.native import NativeLibrary


class SupportResolver:
    """A plan resolver with no fused kernels that carries a library of support functions (the native GEMM and
    convolution drivers) for the fast kernels to use."""

    def __init__(self, library):
        self.library = library

    def __call__(self, node):
        return None


@pytest.fixture(scope="module")
def resolver():
    return SupportResolver(NativeLibrary.from_sections(build_kernels([], cache_dir="").sections))
