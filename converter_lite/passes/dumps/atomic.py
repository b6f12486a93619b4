"""Atomic file writes: readers never see a half-written dump."""
from __future__ import annotations

import os
import tempfile


def atomic_write_text(path: str, text: str) -> str:
    """Writes ``text`` (UTF-8) to ``path`` through a temp file in the same directory and ``os.replace``;
    creates missing directories.  Returns ``path``."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp_", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
