"""The hand-written native drivers: one folder each, the one table of them in ``registry.py``.

    kernels/<driver>/abi.py    symbol(s) with their version, the record layout both sides use, the ops served,
                               ``select(node)`` (which nodes may run on it); no llvmlite
    kernels/<driver>/emit.py   ``EMITTERS = {symbol: emit(module)}``: the driver in LLVM IR, written with the
                               codegen toolkit (codegen/vector.py, internal.py, threadpool.py)
    kernels/<driver>/bind.py   numpy + ctypes: weight packing, the record, the bound call the runtime's plan runs

Drivers: runlist (the plan's step runner), gemm (tile driver + native sgemm), conv_tiles (im2col + BLAS),
conv_direct, conv_pointwise, conv_depthwise, resize_linear, resize_nearest, depth_to_space (DepthToSpace,
SpaceToDepth, the scatter of a kernel = stride ConvTranspose), pool2d (MaxPool, AveragePool and the global
pools).  Shared by the binders: native_call.py (aligned buffers, record words, the bound call), conv_epilogue.py
(residual Add + clamps in a convolution's epilogue), blas.py (numpy's CBLAS entry points).  The converter
records each node's drivers (passes/select_drivers.py), the build links those (codegen.build_kernels
``drivers``), the runtime binds a node only to its recorded drivers.

A new driver: a folder with the three modules and its name in ``registry.NAMES`` (README: "Adding a native
driver", with runlist/ as the template).
"""
