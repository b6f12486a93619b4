"""Atomic file writes, the one home for them: a reader never sees a half-written file and a failed write leaves
nothing behind (the ``.ms`` writer, the dumps, the kernel cache, benchmark reports).

    with atomic_file(path) as f:       # a temp file in the target's directory, binary
        f.write(...)                   # on success: flushed, fsync'd (``durable``) and renamed over ``path``
    write_text(path, text)             # the same for one text, creating missing directories
"""
from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO


@contextmanager
def atomic_file(path: str, durable: bool = True, make_dirs: bool = False) -> Iterator[BinaryIO]:
    """A binary file that becomes ``path`` when the block ends without an error (the temp file is removed on
    any error, the error re-raised).  The file's mode honours the umask, as ``open`` would."""
    directory = os.path.dirname(os.path.abspath(path))
    if make_dirs:
        os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_bytes(path: str, data: bytes, durable: bool = False, make_dirs: bool = True) -> str:
    """Writes ``data`` to ``path`` atomically; returns ``path``."""
    with atomic_file(path, durable=durable, make_dirs=make_dirs) as f:
        f.write(data)
    return path


def write_text(path: str, text: str, durable: bool = False, make_dirs: bool = True) -> str:
    """Writes ``text`` (UTF-8, ``\\n`` line ends) to ``path`` atomically; returns ``path``."""
    return write_bytes(path, text.encode("utf-8"), durable=durable, make_dirs=make_dirs)
