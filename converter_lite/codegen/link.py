"""Object files -> one shared object, with the system C compiler driver (``cc -shared``).

``cc`` is only needed at conversion time; a missing one is a clear ConverterError naming what to install.
Kernels that use threads are linked with ``-pthread`` (their thread pool, codegen/threadpool.py, uses pthread_create);
no OpenMP runtime is needed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from ..errors import RET_ERROR, ConverterError


def find_cc(cc: str = "cc") -> str:
    exe = shutil.which(cc)
    if exe is None:
        raise ConverterError(RET_ERROR, f"native kernels need a C compiler to link, and {cc!r} was not found: "
                                        "install a C compiler (e.g. apt-get install gcc)")
    return exe


def link_shared(objects: list[bytes], openmp: bool, cc: str = "cc") -> bytes:
    """Links ELF objects into a shared object and returns its bytes."""
    exe = find_cc(cc)
    with tempfile.TemporaryDirectory(prefix="cl_link_") as tmp:
        paths = []
        for i, data in enumerate(objects):
            p = os.path.join(tmp, f"k{i}.o")
            with open(p, "wb") as f:
                f.write(data)
            paths.append(p)
        out = os.path.join(tmp, "lib.so")
        cmd = [exe, "-shared", "-o", out, *paths, "-lm", "-Wl,-z,noexecstack"]
        if openmp:                                  # "uses threads" (the name predates threadpool.py)
            cmd.insert(2, "-pthread")
        try:
            res = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            raise ConverterError(RET_ERROR, f"linking native kernels failed: {e}") from None
        if res.returncode != 0:
            hint = ""
            raise ConverterError(RET_ERROR, f"linking native kernels with {' '.join(cmd[:3])} failed{hint}: "
                                            f"{res.stderr.strip()[-2000:]}")
        with open(out, "rb") as f:
            return f.read()
