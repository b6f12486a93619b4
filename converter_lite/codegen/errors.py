"""The error a kernel that cannot be lowered raises, so the caller keeps that kernel interpreted."""
from __future__ import annotations

from ..errors import RET_NOT_SUPPORT, ConverterError


class UnsupportedOpError(ConverterError):
    """``op`` (in kernel ``kernel``) has no native lowering; ``reason`` says what is missing."""

    def __init__(self, op: str, kernel: str = "", reason: str = ""):
        self.op = op
        self.kernel = kernel
        self.reason = reason or "no native emitter"
        where = f" in kernel {kernel!r}" if kernel else ""
        super().__init__(RET_NOT_SUPPORT, f"op {op}{where} cannot be compiled to native code: {self.reason}")
