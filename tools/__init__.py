"""Developer tools: the demo (make run), the conformance runner, benchmarks."""
