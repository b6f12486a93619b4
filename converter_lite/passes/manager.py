"""The graph-kernel pass manager: runs ``DEFAULT_PIPELINE`` stage by stage, MindSpore-style.

Enabling rule for one pipeline slot (MindSpore ``GraphKernelPassManager::Add`` + our fusion switch file):

1. level = the slot's level, or for a flag-gated slot 1 if the flag is on else NEVER;
   enabled = ``opt_level >= level``;
2. pattern-fusion stage only: an explicit fusion-switch entry for the pass sets it on/off, and
   ``"ALL":"off"`` of its section turns off the passes without an entry;
3. if enabled and listed in ``disable_pass`` -> off; if not enabled and listed in ``enable_pass`` -> on.

``enable_pass``/``disable_pass`` items may be ``"<S>.<P>"``, ``"<stagename>.<passname>"``, the full name
``stage<S>_<stagename>_<P>_<passname>`` or the bare pass name (every slot of that pass).

A slot whose pass has no registered class yet is skipped with a DEBUG line.  Log lines (INFO, logger
``converter_lite``) follow MindSpore: ``Run pass <full> in <N> us.``, ``pass <full> is disabled.``,
``Run graphkernel optimization begin.``/``end.``.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass

from ..config import LOGGER_NAME, GraphKernelConfig
from ..errors import RET_ERROR, ConverterError
from ..fileio import write_text
from ..ir.core import Graph
from ..ir.printer import dump_ir
from ..ops.verify import VerifyError, verify
from .base import Pass, PassContext
from .dumps import graph_svg, write_fusion_svgs, write_text_dumps
from .pipeline import DEFAULT_PIPELINE, FUSION_SWITCH_ALIASES, FUSION_SWITCH_STAGE, NEVER, UB_FUSION_PASSES, StageSpec
from .registry import PASSES

IR_DUMP_SUBDIR = os.path.join("verbose_ir_files", "graph_kernel")


@dataclass(frozen=True)
class PassSlot:
    """One pass position in the pipeline, with its stable ids."""
    stage_id: int
    stage_name: str
    pass_id: int
    name: str
    level: int
    flag: str | None

    @property
    def full_name(self) -> str:
        return f"stage{self.stage_id}_{self.stage_name}_{self.pass_id}_{self.name}"

    @property
    def switch_names(self) -> tuple[str, ...]:
        """Every spelling of this slot accepted by enable_pass/disable_pass."""
        return (f"{self.stage_id}.{self.pass_id}", f"{self.stage_name}.{self.name}", self.full_name,
                self.name)


class PassFailedError(ConverterError):
    """A pass raised, or left an IR that fails verification; the message names the pass."""

    def __init__(self, pass_full_name: str, message: str):
        super().__init__(RET_ERROR, f"graph kernel pass {pass_full_name} failed: {message}")
        self.pass_full_name = pass_full_name


class PassManager:
    """Builds the slots of a pipeline and runs the enabled ones over a graph."""

    def __init__(self, pipeline: tuple[StageSpec, ...] = DEFAULT_PIPELINE,
                 registry: dict[str, type[Pass]] | None = None):
        self.registry = PASSES if registry is None else registry
        self.slots = [PassSlot(s, stage.name, p, spec.name, spec.level, spec.flag)
                      for s, stage in enumerate(pipeline) for p, spec in enumerate(stage.passes)]

    # -- switches -------------------------------------------------------------------------------------------
    def pass_names(self) -> list[str]:
        """The switchable pass names, unique, in pipeline order."""
        return list(dict.fromkeys(slot.name for slot in self.slots))

    def level_of(self, slot: PassSlot, config: GraphKernelConfig) -> int:
        if slot.flag is not None:
            return 1 if getattr(config, slot.flag) else NEVER
        return slot.level

    def is_enabled(self, slot: PassSlot, config: GraphKernelConfig) -> bool:
        """The enabling rule of the module docstring."""
        enabled = config.opt_level >= self.level_of(slot, config)
        if config.fusion_switch is not None and slot.stage_name == FUSION_SWITCH_STAGE:
            section = "UBFusion" if slot.name in UB_FUSION_PASSES else "GraphFusion"
            names = (slot.name, *FUSION_SWITCH_ALIASES.get(slot.name, ()))
            state = config.fusion_switch.state(section, names)
            if state is not None:
                enabled = state
        names = slot.switch_names
        if enabled and config.pass_listed("disable", names):
            return False
        if not enabled and config.pass_listed("enable", names):
            return True
        return enabled

    def unknown_switches(self, config: GraphKernelConfig) -> list[str]:
        """Warnings for enable_pass/disable_pass items and fusion-switch entries that match no pass."""
        known = {n for slot in self.slots for n in slot.switch_names}
        warnings = [f"For 'graph_kernel_flags', the pass '{item}' in '{key}' matches no graph kernel pass; "
                    f"valid names: {','.join(self.pass_names())} (or '<stage_id>.<pass_id>', "
                    f"'<stage_name>.<pass_name>', 'stage<S>_<stage>_<P>_<pass>')"
                    for key in ("enable_pass", "disable_pass") for item in getattr(config, key)
                    if item not in known]
        if config.fusion_switch is not None:
            aliases = {a for name in self.pass_names() for a in (name, *FUSION_SWITCH_ALIASES.get(name, ()))}
            warnings += [f"fusion switch file: '{name}' is not a fusion pass of this converter; ignored"
                         for name in config.fusion_switch.names() if name not in aliases]
        return warnings

    # -- running --------------------------------------------------------------------------------------------
    def run(self, graph: Graph, ctx: PassContext) -> PassContext:
        config: GraphKernelConfig = ctx.config
        log = ctx.log
        for warning in self.unknown_switches(config):
            log.warning(warning)
        check = config.verify_ir or config.enable_debug_mode
        ir_dir = os.path.join(config.dump_dir, IR_DUMP_SUBDIR) if config.dump_ir else None
        dump_count = 0
        for slot in self.slots:
            full = slot.full_name
            if not self.is_enabled(slot, config):
                log.info("pass %s is disabled.", full)
                continue
            cls = self.registry.get(slot.name)
            if cls is None:
                log.debug("pass %s is not available (no class registered for %r); skipped.", full, slot.name)
                continue
            start = time.perf_counter()
            try:
                graphs = [graph] if cls.whole_model else graph.all_graphs()
                changed = False
                for g in graphs:                       # each control-flow body optimized on its own
                    changed |= bool(cls().run(g, ctx))
            except ConverterError:
                raise
            except Exception as e:
                log.error("graph kernel pass %s raised %s: %s", full, type(e).__name__, e)
                raise PassFailedError(full, f"{type(e).__name__}: {e}") from e
            elapsed_us = int((time.perf_counter() - start) * 1e6)
            log.info("Run pass %s in %d us.", full, elapsed_us)
            ctx.stats[f"time_us/{full}"] = elapsed_us
            ctx.stats[f"changed/{full}"] = int(changed)
            if ir_dir is not None:
                path = os.path.join(ir_dir, f"{dump_count:04d}_{full}.ir")
                write_text(path, dump_ir(graph))
                dump_count += 1
            if check:
                try:
                    verify(graph)
                except VerifyError as e:
                    raise PassFailedError(full, f"the IR after the pass is invalid: {e}") from e
        return ctx


def run_graph_kernel_optimizer(graph: Graph, config: GraphKernelConfig, log: logging.Logger | None = None,
                               manager: PassManager | None = None) -> PassContext:
    """Runs the graph-kernel optimizer on ``graph`` in place (nothing when ``opt_level`` is 0).

    Returns the PassContext (stats, text records).  With ``dump_as_text`` the text records go to
    ``<dump_dir>/graph_kernel_dump/``; with ``dump_as_text`` or ``dump_ir`` the graph before and after
    optimization is drawn there as SVG.
    """
    log = log or logging.getLogger(LOGGER_NAME)
    ctx = PassContext(config=config, log=log,
                      dump_dir=config.dump_dir if config.dump_as_text else None)
    if not config.enabled:
        return ctx
    manager = manager or PassManager()
    log.info('graph_kernel_flags = "%s", all flags: %s', config.flags_text, config.flags_json())
    log.info("graph kernel passes: %s", ",".join(manager.pass_names()))
    draw = config.dump_as_text or config.dump_ir
    before_svg = graph_svg(graph, f"{graph.name}: before graph kernel fusion") if draw else None
    log.info("Run graphkernel optimization begin.")
    manager.run(graph, ctx)
    log.info("Run graphkernel optimization end.")
    if config.dump_as_text:
        write_text_dumps(ctx, config.dump_dir)
    if draw:
        write_fusion_svgs(before_svg, graph, config.dump_dir)
    return ctx


# -- logging ----------------------------------------------------------------------------------------------------
GLOG_LEVELS = {"0": logging.DEBUG, "1": logging.INFO, "2": logging.WARNING, "3": logging.ERROR}
LOG_FORMAT = ("[%(levelname)s] CONVERTER(%(process)d):%(asctime)s.%(msecs)03d "
              "[%(module)s.py:%(lineno)d] %(funcName)s] %(message)s")


def setup_logging(glog_v: str | None) -> logging.Logger:
    """Configures the ``converter_lite`` logger like MindSpore's GLOG_v (0 DEBUG, 1 INFO, 2 WARNING (default),
    3 ERROR; anything else -> WARNING), printing ``[LEVEL] ...`` lines on stderr.  Idempotent."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(GLOG_LEVELS.get((glog_v or "").strip(), logging.WARNING))
    for h in [h for h in logger.handlers if getattr(h, "_converter_lite", False)]:
        logger.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler._converter_lite = True          # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt="%Y-%m-%d-%H:%M:%S"))
    logger.addHandler(handler)
    return logger


__all__ = [
    "IR_DUMP_SUBDIR",
    "PassFailedError",
    "PassManager",
    "PassSlot",
    "run_graph_kernel_optimizer",
    "setup_logging",
]
