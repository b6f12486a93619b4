"""Differential fuzzing: random valid ONNX graphs of fusable ops, converted at opt_level 0-3, against onnxruntime.

    FUZZ_EXAMPLES=N   number of graphs (default 25: the short, derandomized run of `make test`)
    FUZZ_SEED=S       seed of a long run (default: derandomized when N <= 25, random otherwise)
    FUZZ_FAILURE_DIR  keep each failing model (.onnx) and its inputs (.npz) there

`make fuzz` runs 5000 graphs.  A failure is shrunk by hypothesis and printed as ONNX text (onnx.printer).
"""
import os

from differential import check_case
from fuzz_strategy import fuzz_cases
from hypothesis import HealthCheck, event, given, seed, settings

DEFAULT_EXAMPLES = 25
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
SEED = os.environ.get("FUZZ_SEED")

_settings = settings(
    max_examples=EXAMPLES,
    derandomize=SEED is None and EXAMPLES <= DEFAULT_EXAMPLES,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=list(HealthCheck),
)


def _seeded(fn):
    return seed(int(SEED))(fn) if SEED is not None else fn


@_seeded
@_settings
@given(case=fuzz_cases())
def test_converted_graph_matches_onnxruntime(case):
    check_case(case.model, case.feeds, case.loose, on_load=_count_native)


def _count_native(level, model):
    native = sum(k.native for k in model.kernels)
    event(f"opt_level {level}: " + ("native kernels" if native else "no native kernel"))
