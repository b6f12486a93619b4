"""What the drivers' selection predicates (``select`` in kernels/*/abi.py) read of an IR node: dtypes, shapes,
constant inputs and the convolution attributes, without importing the op table."""
from __future__ import annotations

_NP_NAMES: dict = {}


def dtype(node, i: int) -> str | None:
    """numpy name of input ``i``'s dtype (``"float32"``), or None when absent or untyped."""
    v = node.inputs[i] if i < len(node.inputs) else None
    if v is None or v.type is None:
        return None
    dt = v.type.dtype
    name = _NP_NAMES.get(dt)
    if name is None:
        name = _NP_NAMES[dt] = str(dt.np)       # (str of a numpy dtype is slow: drivers ask it per node)
    return name


def shape(node, i: int) -> tuple | None:
    v = node.inputs[i] if i < len(node.inputs) else None
    return None if v is None or v.type is None or v.type.shape is None else tuple(v.type.shape)


def is_const(node, i: int) -> bool:
    v = node.inputs[i] if i < len(node.inputs) else None
    return v is not None and getattr(v, "const", None) is not None


_MEMO: list = [None, None]          # [node being selected for (registry.select), its conv_2d facts]


def selecting(node) -> None:
    """Starts (a node) or ends (None) one ``registry.select``: every conv driver's ``select`` asks ``conv_2d``
    for the same node in turn, which then computes the facts once."""
    _MEMO[:] = [node, None]


def conv_2d(node) -> dict | None:
    """A 2-D Conv with constant 4-D weights: ``dtype``, ``c``, ``m``, ``group``, ``cg``, ``kh``, ``kw``, ``sh``,
    ``sw``, ``pads``; else None (the caller must not change the dict)."""
    if node.op != "Conv" or len(node.inputs) < 2:
        return None
    memo = _MEMO[:]
    if memo[0] is node and memo[1] is not None:
        return memo[1]
    facts = _conv_2d(node, shape(node, 0), shape(node, 1))
    if memo[0] is node:
        _MEMO[:] = [node, facts]
    return facts


def _conv_2d(node, x, w) -> dict | None:
    if x is None or w is None or len(x) != 4 or len(w) != 4 or not is_const(node, 1):
        return None
    a = node.attrs
    sh, sw = (int(s) for s in a.get("strides", (1, 1)))
    return {"dtype": dtype(node, 0), "h": int(x[2]), "w": int(x[3]), "c": int(x[1]), "m": int(w[0]), "cg": int(w[1]), "group": int(a.get("group", 1)),
            "kh": int(w[2]), "kw": int(w[3]), "sh": sh, "sw": sw, "pads": tuple(int(p) for p in a.get("pads", (0,) * 4)),
            "auto_pad": a.get("auto_pad", "NOTSET")}


def is_depthwise(g: dict) -> bool:
    return g["cg"] == 1 and g["group"] == g["c"] == g["m"]


# below these the patch copy (runs of kw elements) costs more than the convolution drivers save: measured
# 4x4 and 2x2 patches (Swin, patch merging) ran 1.5-2x slower, 16x16 (ViT) 10-25% faster on one thread
PATCH_MIN_TAPS = 64
PATCH_MIN_ROW_BYTES = 64
FRAMES_MAX = 64
_ITEMSIZE = {"float32": 4, "float64": 8}


def is_patch(g: dict, node) -> bool:
    """A Conv that runs as one GEMM on the gemm drivers (runtime/fast/patch.py, which applies the same rule via
    ``patch_rule``) rather than on a convolution driver: a patch embedding (kernel = stride) or a framing Conv
    (an STFT as a Conv: overlapping frames along one row, few of them); see ``patch_rule``."""
    return patch_rule(g["group"], g["c"], g["h"], g["w"], g["kh"], g["kw"], g["sh"], g["sw"], g["pads"],
                      _ITEMSIZE.get(g["dtype"], 0), lambda: node.attrs.get("dilations", (1, 1)))


def patch_rule(group: int, c: int, h: int, w: int, kh: int, kw: int, sh: int, sw: int, pads, item: int,
               dilations) -> bool:
    """Group 1, no padding, dilations 1 (``dilations()`` is asked last), rows of at least ``PATCH_MIN_ROW_BYTES``
    and at least ``PATCH_MIN_TAPS`` taps per output, and either

    * patches: kernel = stride (ViT's 16x16 stem), or
    * frames: the kernel spans the input's height (one output row), a hop (column stride) of at least a row's
      minimum (``PATCH_MIN_ROW_BYTES``: ordinary temporal Convs of stride 1-4 stay on the convolution drivers)
      and at most ``FRAMES_MAX`` outputs along the row (an STFT as a Conv: openWakeWord's mel front end,
      [257, 1, 512] at stride 160 over 1,760 samples, 8 frames; silero VAD's [258, 1, 256] at stride 128).
      Each frame is one row of the patch matrix, so the GEMM streams the weights once, packed at load, where
      the tile driver's BLAS repacked all of them on every call for 8 columns."""
    if (group != 1 or any(pads) or h < kh or w < kw or kw * item < PATCH_MIN_ROW_BYTES
            or c * kh * kw < PATCH_MIN_TAPS):
        return False
    patches = (kh, kw) == (sh, sw) and kh * kw >= PATCH_MIN_TAPS
    frames = kh == h and sw * item >= PATCH_MIN_ROW_BYTES and (w - kw) // sw < FRAMES_MAX
    # (the dilations last: three drivers ask this of every Conv of a plan, and most fail the first tests)
    return (patches or frames) and tuple(int(d) for d in dilations()) == (1, 1)


def _ints(attrs, name, default) -> tuple[int, ...]:
    v = attrs.get(name)
    return tuple(int(x) for x in (v if v is not None and len(v) else default))


def conv_transpose_blocks(node) -> bool:
    """A float32 2-D ConvTranspose with constant weights whose kernel equals its stride, without pads, output
    padding, output shape or dilation, group 1: one GEMM whose ``[(m, kh, kw), h*w]`` blocks each go to one
    output pixel (runtime/fast/patch.py ``conv_transpose_patches``: the GEMM and depth-to-space drivers)."""
    if len(node.inputs) < 2 or dtype(node, 0) != "float32" or not is_const(node, 1):
        return False
    w = shape(node, 1)
    if w is None or len(w) != 4:
        return False
    a = node.attrs
    k = (int(w[2]), int(w[3]))
    return (int(a.get("group", 1)) == 1 and not a.get("output_shape")
            and _ints(a, "kernel_shape", k) == k and _ints(a, "strides", (1, 1)) == k
            and not any(_ints(a, "pads", (0,) * 4)) and not any(_ints(a, "output_padding", (0, 0)))
            and _ints(a, "dilations", (1, 1)) == (1, 1)
            and a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID", b"NOTSET", b"VALID"))
