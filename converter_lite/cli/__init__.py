"""Command-line tools: converter_lite and benchmark."""
