"""DepthToSpace / SpaceToDepth on the native block-rearrangement driver (kernels/depth_to_space/): the
fast-kernel table's entries for them wrap its bound step in an Impl (the flat gather, gather.py, is their
fallback for models converted without the driver and for other dtypes)."""
from __future__ import annotations

from ...kernels.depth_to_space.bind import depth_to_space as _bind_depth_to_space
from ..program import Impl, NodeCtx


def depth_to_space(ctx: NodeCtx) -> Impl | None:
    """The native DepthToSpace / SpaceToDepth step of ``ctx``'s node (kernels/depth_to_space/bind.py), or
    None."""
    bind = _bind_depth_to_space(ctx)
    return None if bind is None else Impl(bind=bind)
