"""The package version (a leaf module: the .ms writer and the pipeline read it without importing the API)."""
__version__ = "0.1.0"
