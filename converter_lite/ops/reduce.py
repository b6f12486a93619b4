"""Reference kernels: placeholder, filled in by its owner."""
