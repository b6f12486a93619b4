"""Simplification passes (opt_level 2): constant folding, CSE, arithmetic simplification, transpose/reshape
elimination and dead-code removal, plus the pattern matcher and rule driver the named fusions share."""
