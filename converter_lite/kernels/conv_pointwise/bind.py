"""1x1, stride 1, unpadded float32 Convs through the pointwise driver (emit.py): vectorised over pixels, weights
packed once at load into blocks of ``MR`` output channels ``[G, nmb, C/G, MR]``.  Chosen over the direct driver
by ``pointwise_pays`` (kernels/conv_direct/bind.py ``native_direct``).  Epilogue: kernels/conv_epilogue.py."""
from __future__ import annotations

import numpy as np

from ...model import pages
from ..conv_epilogue import EpilogueHook
from ..native_call import aligned, call_driver, data_address, record
from ..packing import shared
from .abi import EXTRA, FIELDS, MR


class PointwiseConv(EpilogueHook):
    """A 1x1, stride 1, unpadded float32 Conv bound to the pointwise driver."""
    FIELDS, MR, EXTRA = FIELDS, MR, EXTRA

    def __init__(self, geo, w: np.ndarray, bias, address: int, max_threads: int, wide: bool):
        g = self.g = geo
        self.address, self.max_threads, self.wide = address, max(1, max_threads), wide
        mg, cg = g.m // g.group, g.c // g.group
        self.nmb = -(-mg // self.MR)
        self.wpk = shared(w, ("pointwise", g.group, self.MR), lambda: self._pack(w, g.group, mg, cg))
        self.bpk = shared(w, ("pointwise-bias", g.group, self.MR, None if bias is None else id(bias)),
                          lambda: self._pack_bias(bias, g.group, mg))
        self.workspace = 0

    def _pack_bias(self, bias, group: int, mg: int) -> np.ndarray:
        bpk = aligned((group, self.nmb * self.MR))
        if bias is not None:
            bpk[:, :mg] = np.asarray(bias, np.float32).reshape(group, mg)
        return bpk

    def _pack(self, w: np.ndarray, group: int, mg: int, cg: int) -> np.ndarray:
        padded = np.zeros((group, self.nmb * self.MR, cg), np.float32)
        padded[:, :mg] = np.asarray(w, np.float32).reshape(group, mg, cg)
        wpk = aligned((group, self.nmb, cg, self.MR))
        wpk[...] = padded.reshape(group, self.nmb, self.MR, cg).transpose(0, 1, 3, 2)
        pages.release(w)                 # the driver reads the packed copy (model/pages.py)
        return wpk

    def bind(self, ins, outs, ws, nt=1):
        g, x, y = self.g, ins[0], outs[0]
        desc = record(self.FIELDS, self.EXTRA, dict(
            n=g.n, c=g.c, m=g.m, group=g.group, p=g.h * g.w, x=data_address(x), y=data_address(y),
            wpk=data_address(self.wpk), bpk=data_address(self.bpk), nmb=self.nmb,
            residual=data_address(ins[-1]) if self.residual else 0, **self.epilogue_words(), wide=int(self.wide)))
        return call_driver(self.address, desc, max(1, min(nt, self.max_threads)), (ins, y, self.wpk, self.bpk, desc))


def pointwise_pays(geo, wide: bool) -> bool:
    """Whether the pointwise driver beats the direct one on this 1x1 convolution: its pixel blocks (64 or 16
    pixels) waste lanes on small images, the direct driver's tiles (12 or 6 pixels) pay a transpose per tile,
    which weighs most when there are few input channels (measured: P=1600, C=8: pointwise 2.1x faster; P=25,
    C=160: direct 2.7x faster)."""
    p, cg = geo.h * geo.w, geo.c // geo.group
    block, tile = (64, 12) if wide else (16, 6)
    return -(-p // block) * block <= -(-p // tile) * tile * (1.0 + 16.0 / max(cg, 1))
