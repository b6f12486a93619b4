"""The runtime's numpy kernels: per op type, a faster implementation than the reference kernel where one applies
(``table.FAST``), bound once per plan into buffers of the arena; some hand a node to a native driver
(converter_lite/kernels/*/bind.py) when the converter recorded one for it."""
