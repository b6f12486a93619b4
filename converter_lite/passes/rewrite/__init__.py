"""Named pattern-fusion passes (MindSpore/Ascend fusion passes), each switchable by name through
``enable_pass``/``disable_pass`` and the fusion switch file.  One fusion per module; ``base.RewritePass`` runs a
module's rules with the shared driver of ``passes/simplify/rewriter.py``."""
