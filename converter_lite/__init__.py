"""converter_lite: an offline converter for ONNX models with graph-kernel fusion and native code generation.

    import converter_lite
    ms_path = converter_lite.convert("model.onnx", "out/model", config_file="akg.cfg")
    model = converter_lite.load(ms_path, num_threads=2)
    outputs = model.run({"x": array})
"""
from .version import __version__  # noqa: E402,F401

from .api import convert, load  # noqa: E402,F401
from .errors import ConverterError  # noqa: E402,F401
