"""The converter's graph IR (pure Python + numpy)."""
from .core import Graph, Node, TensorType, Value  # noqa: F401
from .dtype import DType  # noqa: F401
