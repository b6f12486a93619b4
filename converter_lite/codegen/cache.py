"""On-disk cache of compiled kernels, keyed by content hash (kernel IR + target + tool versions), with a size
cap and least-recently-used eviction (like ccache's ``max_size``).

Entries are immutable files ``<root>/<key[:2]>/<key><suffix>``.  Writers create a temp file in the same
directory and ``os.replace`` it into place, so parallel conversions never see a partial entry and the last
identical writer wins harmlessly.  Unreadable entries count as misses.

Where and how big, for the whole process (as ccache reads CCACHE_DIR / CCACHE_MAXSIZE; no pass reads these):

* ``CONVERTER_LITE_CACHE_DIR``: the root (default ``~/.cache/converter_lite/kernels``);
* ``CONVERTER_LITE_CACHE_MAX_SIZE``: the cap, bytes or with a K/M/G suffix (default ``DEFAULT_MAX_BYTES``;
  0 = no cap).

A hit marks its entry as used (its mtime).  After a build that wrote entries, ``trim`` removes the least
recently used entries until the cache holds at most ``LOW_WATER`` of the cap.  Trimming holds an exclusive
``flock`` on ``<root>/.lock`` (a scan takes milliseconds; a second trimmer waits), so every build's trim comes
after its own writes and sees every write of the builds that trimmed before it: when concurrent conversions
end, the cache is under its cap.  Removing an entry another process is about to read only costs that process
a recompile (a miss).
"""
from __future__ import annotations

import hashlib
import os

from ..errors import RET_INPUT_PARAM_INVALID, ConverterError
from ..fileio import write_bytes

DEFAULT_MAX_BYTES = 300 << 20
LOW_WATER = 0.8                 # a trim goes down to this fraction of the cap, so it does not run every build
ENV_DIR = "CONVERTER_LITE_CACHE_DIR"
ENV_MAX_SIZE = "CONVERTER_LITE_CACHE_MAX_SIZE"
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def content_key(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        data = p.encode() if isinstance(p, str) else p
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def default_cache_dir() -> str:
    return os.environ.get(ENV_DIR) or os.path.join(os.path.expanduser("~"), ".cache", "converter_lite", "kernels")


def parse_size(text: str) -> int:
    """``"300M"`` -> bytes (K/M/G/T suffixes, optional ``B``/``iB``); ValueError naming the text otherwise."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    number = t[:-1] if unit else t
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"{ENV_MAX_SIZE}={text!r} is not a size (bytes, or a number with K, M, G or T)") from None
    if value < 0:
        raise ValueError(f"{ENV_MAX_SIZE}={text!r} is negative")
    return int(value * _UNITS[unit])


def default_max_bytes() -> int:
    """The cap from ``CONVERTER_LITE_CACHE_MAX_SIZE`` (ConverterError -600 naming it when it is no size)."""
    text = os.environ.get(ENV_MAX_SIZE)
    try:
        return DEFAULT_MAX_BYTES if not text else parse_size(text)
    except ValueError as e:
        raise ConverterError(RET_INPUT_PARAM_INVALID, str(e)) from None


class KernelCache:
    """``root=None`` disables the cache; ``max_bytes`` None takes ``default_max_bytes()``, 0 means no cap."""

    def __init__(self, root: str | None, max_bytes: int | None = None):
        self.root = root
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes
        self.hits = 0
        self.misses = 0
        self.written = 0

    def _path(self, key: str, suffix: str) -> str:
        return os.path.join(self.root, key[:2], key + suffix)

    def get(self, key: str, suffix: str) -> bytes | None:
        if not self.root:
            return None
        path = self._path(key, suffix)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            self.misses += 1
            return None
        self.hits += 1
        try:
            os.utime(path)                         # recently used: the last to be evicted
        except OSError:
            pass
        return data

    def put(self, key: str, suffix: str, data: bytes) -> None:
        if not self.root:
            return
        path = self._path(key, suffix)
        try:
            write_bytes(path, data)
            self.written += len(data)
        except OSError:
            pass                                   # a read-only or full cache never fails a conversion

    def size(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def _entries(self) -> list[tuple[str, int, float]]:
        """(path, bytes, mtime) of every entry."""
        out = []
        try:
            shards = [e.path for e in os.scandir(self.root) if e.is_dir(follow_symlinks=False)]
        except OSError:
            return out
        for shard in shards:
            try:
                with os.scandir(shard) as it:
                    for e in it:
                        try:
                            st = e.stat(follow_symlinks=False)
                        except OSError:
                            continue                # removed meanwhile
                        out.append((e.path, st.st_size, st.st_mtime))
            except OSError:
                continue
        return out

    def trim(self, force: bool = False) -> int:
        """Evicts least recently used entries when the cache exceeds its cap (after a build that wrote, or with
        ``force``); returns how many were removed."""
        if not self.root or self.max_bytes <= 0 or not (self.written or force):
            return 0
        import fcntl

        try:
            os.makedirs(self.root, exist_ok=True)
            lock = open(os.path.join(self.root, ".lock"), "a+b")
        except OSError:
            return 0
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
            except OSError:
                return 0                          # a file system without locks: no trim rather than a race
            entries = self._entries()
            total = sum(size for _, size, _ in entries)
            if total <= self.max_bytes:
                return 0
            goal = int(self.max_bytes * LOW_WATER)
            removed = 0
            for path, size, _ in sorted(entries, key=lambda e: e[2]):
                if total <= goal:
                    break
                try:
                    os.remove(path)
                except OSError:
                    continue
                total -= size
                removed += 1
            return removed
