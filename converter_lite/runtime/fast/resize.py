"""Linear and nearest Resize on the native drivers (kernels/resize_linear/, kernels/resize_nearest/): the
fast-kernel table's entry for Resize wraps their bound steps in an Impl."""
from __future__ import annotations

from ...kernels.resize_linear.bind import linear_resize as _bind_linear_resize
from ...kernels.resize_nearest.bind import nearest_resize as _bind_nearest_resize
from ..program import Impl, NodeCtx


def linear_resize(ctx: NodeCtx) -> Impl | None:
    """The native linear Resize step of ``ctx``'s node (kernels/resize_linear/bind.py), or None."""
    bind = _bind_linear_resize(ctx)
    return None if bind is None else Impl(bind=bind)


def nearest_resize(ctx: NodeCtx) -> Impl | None:
    """The native nearest Resize step of ``ctx``'s node (kernels/resize_nearest/bind.py), or None."""
    bind = _bind_nearest_resize(ctx)
    return None if bind is None else Impl(bind=bind)
