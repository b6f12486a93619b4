"""Graph passes: generic clean-ups and the graph-kernel optimizer."""
