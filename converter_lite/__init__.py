"""converter_lite: an offline converter for ONNX models with graph-kernel fusion and native code generation."""
__version__ = "0.1.0"
