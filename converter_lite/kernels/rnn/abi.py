"""The recurrent-layer driver's ABI (emit.py writes the code, bind.py the record).

    void cl_rnn_v1_f32(i8* desc, i64 nthreads)

One ONNX LSTM, GRU or RNN layer of float32 (forward, reverse or bidirectional; layout 0 or 1; the default
activations, no clip, no LSTM peepholes or input_forget): every time step of every (direction, batch row) in
native code, the weights packed at load.  Units of work are the (direction, group of ``rpg`` batch rows) pairs,
whose recurrences are independent: they spread over the thread pool.

``desc``: ``FIELDS`` i64 words (sizes, strides in elements, addresses as integers), then ``EXTRA`` word the
entry point writes (units per chunk).  emit.py documents the cells and the packed layouts.
"""
from ..node_facts import dtype, is_const

SYMBOL = "cl_rnn_v1_f32"
SYMBOLS = (SYMBOL,)
FIELDS = ("cell", "seq", "batch", "rpg", "inp", "hidden", "hp", "gt", "gt2", "nd", "reverse",
          "x", "x_ts", "x_bs", "wt", "rt", "bias", "rt2", "bias2",
          "xw", "xw_ds", "xw_ts", "xw_bs",
          "h0", "c0", "i_ds", "i_bs",
          "y", "y_ts", "y_ds", "y_bs",
          "yh", "yc", "o_ds", "o_bs",
          "scratch")
EXTRA = 1
OPS = ("LSTM", "GRU", "RNN")
# the ``cell`` word: LSTM; GRU with linear_before_reset (one phase); GRU without (two phases); plain RNN
LSTM, GRU_LINEAR, GRU_RESET, RNN = 0, 1, 2, 3
SECTIONS = {LSTM: 4, GRU_LINEAR: 4, GRU_RESET: 3, RNN: 1}      # hp-wide gate sections of the first phase
BLOCK = 128                        # gate columns per accumulator block (8 vectors of 16 lanes); gt is a multiple
ROWS_MAX = 4                       # batch rows a unit's gate blocks take together (emit.py SHAPES)
DEFAULT_ACTIVATIONS = {"LSTM": ("sigmoid", "tanh", "tanh"), "GRU": ("sigmoid", "tanh"), "RNN": ("tanh",)}
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}   # gates per direction in W, R and each half of B


def select(node) -> tuple[str, ...]:
    """float32 recurrent layers with constant W and R (and B), without LSTM peepholes; the binder (runtime/fast/
    rnn.py) checks the rest (attributes, shapes, sequence lengths) and runs another kernel where it declines."""
    if dtype(node, 0) != "float32" or not (is_const(node, 1) and is_const(node, 2)):
        return ()
    if len(node.inputs) > 3 and node.inputs[3] is not None and not is_const(node, 3):
        return ()
    if node.op == "LSTM" and len(node.inputs) > 7 and node.inputs[7] is not None:
        return ()
    return SYMBOLS


def driver_takes(node) -> bool:
    """Whether the driver runs the layer whatever its shapes: ``select``'s conditions plus the attributes the
    binder checks (the default activations, no clip, no LSTM input_forget).  The expander leaves such layers of
    more than a few steps to it (passes/expand/rnn.py)."""
    if not select(node) or node.attrs.get("clip") is not None or int(node.attrs.get("input_forget", 0)):
        return False
    acts = node.attrs.get("activations")
    nd = 2 if node.attrs.get("direction", "forward") == "bidirectional" else 1
    return not acts or tuple(str(a).lower() for a in acts) == DEFAULT_ACTIVATIONS[node.op] * nd
