"""A plan step on a kernel that computes fresh arrays (``Impl.call``: the reference kernels, numpy fast kernels
without a bind), as opposed to a bound step writing into its buffers: its dynamic inputs are read from the
executor's ``env``, its results checked against the declared shape, cast to the declared dtype and copied into
their buffers, or (dynamic outputs, sequences, optionals) kept in ``env`` as arrays of their own.
"""
from __future__ import annotations

import numpy as np


def generic_step(st, ins: list, outs: list, env: list, dtypes: list):
    """A step computing fresh arrays (``impl.call``): dynamic inputs are read from ``env``; results are copied
    into their buffers (checked against the declared shape, cast to the declared dtype) or stored in ``env``."""
    call = st.impl.call
    dyn = [(pos, v) for pos, (v, a) in enumerate(zip(st.inputs, ins)) if v is not None and a is None]
    specs = list(zip(outs, st.outputs, dtypes))
    n = len(specs)

    def run():
        args = list(ins)
        for pos, v in dyn:
            args[pos] = env[v]
        res = call(args)
        if len(res) < n:
            raise ValueError(f"kernel produced {len(res)} outputs, expected {n}")
        for (arr, vid, dt), r in zip(specs, res):
            if arr is None and (r is None or isinstance(r, list)):
                # a sequence (its elements may be views of this run's buffers, which later steps overwrite:
                # each one is kept as an array of its own) or an empty optional
                env[vid] = r if r is None else [a if isinstance(a, np.ndarray) and a.flags.owndata
                                                else np.array(a, copy=True) for a in r]
                continue
            if arr is None:
                r = np.asarray(r)
                if dt is not None and dt.kind not in "OUS" and r.dtype != dt:
                    r = r.astype(dt)
                env[vid] = r if r.flags.owndata else r.copy()
                continue
            if not isinstance(r, np.ndarray):
                r = np.asarray(r)
            if r.shape != arr.shape:
                raise ValueError(f"kernel produced shape {list(r.shape)}, the model declares {list(arr.shape)}")
            arr[...] = r                # casts unsafely, like copyto(casting="unsafe"), at under half its cost
    return run
