"""Linear Resize on the native driver (kernels/resize_linear/): the fast-kernel table's entry for Resize wraps
its bound step in an Impl."""
from __future__ import annotations

from ...kernels.resize_linear.bind import linear_resize as _bind_linear_resize
from ..program import Impl, NodeCtx


def linear_resize(ctx: NodeCtx) -> Impl | None:
    """The native linear Resize step of ``ctx``'s node (kernels/resize_linear/bind.py), or None."""
    bind = _bind_linear_resize(ctx)
    return None if bind is None else Impl(bind=bind)
