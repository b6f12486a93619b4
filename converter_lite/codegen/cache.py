"""On-disk cache of compiled kernels, keyed by content hash (kernel IR + target + tool versions).

Entries are immutable files ``<root>/<key[:2]>/<key><suffix>``.  Writers create a temp file in the same
directory and ``os.replace`` it into place, so parallel conversions never see a partial entry and the last
identical writer wins harmlessly.  Unreadable entries count as misses.
"""
from __future__ import annotations

import hashlib
import os

from ..fileio import write_bytes


def content_key(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        data = p.encode() if isinstance(p, str) else p
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def default_cache_dir() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "converter_lite", "kernels")


class KernelCache:
    """``root=None`` disables the cache."""

    def __init__(self, root: str | None):
        self.root = root
        self.hits = 0
        self.misses = 0

    def _path(self, key: str, suffix: str) -> str:
        return os.path.join(self.root, key[:2], key + suffix)

    def get(self, key: str, suffix: str) -> bytes | None:
        if not self.root:
            return None
        try:
            with open(self._path(key, suffix), "rb") as f:
                data = f.read()
        except OSError:
            self.misses += 1
            return None
        self.hits += 1
        return data

    def put(self, key: str, suffix: str, data: bytes) -> None:
        if not self.root:
            return
        path = self._path(key, suffix)
        try:
            write_bytes(path, data)
        except OSError:
            pass                                   # a read-only or full cache never fails a conversion
