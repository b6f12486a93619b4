"""Op table: reference kernels (numpy), fusion kinds and shape inference, keyed by op type.

Importing this package registers every op; the modules are listed here so the table is complete.
"""
from . import registry
from .registry import OPS, OpDef, OpKind, KernelError, evaluate, evaluate_node, infer_types  # noqa: F401
from . import elementwise, reduce, nn, tensor, losses, graph_kernel  # noqa: F401  (registration side effects)
from . import nn_conv, nn_pool, nn_norm, nn_resize, nn_space  # noqa: F401  (more NN ops)
from . import tensor_index, tensor_create, tensor_pad  # noqa: F401  (more tensor ops)
from . import quantize, quantized_conv, qlinear, qlinear_ms, random_ops, signal_ops, rnn, detection, rotary  # noqa: F401
from . import attention, cumprod, bitcast, unique, swiglu, max_unpool, deform_conv, strings, tfidf  # noqa: F401
from . import fused_ops, bf16  # noqa: E402,F401  (ops created by the named pattern fusions and --bf16)
from . import control_flow, sequence  # noqa: E402,F401  (If/Loop/Scan/SequenceMap, sequences and optionals)
