"""Training extensions: how a package outside ``gnn`` changes FP32 training (quantization, for one) without
``gnn`` importing it.

The trainer (`gnn.trainer`) knows one method of its own, ``"none"`` (FP32). Every other ``TrainConfig.quant``
names a `TrainingExtension` registered here, and the trainer calls it at fixed points of a run::

    ext.validate(cfg)                      # TrainConfig.__post_init__: the method's rules on cfg's settings
    model = ext.prepare(model, graph, cfg) # before training (after the FP32 warm-up): e.g. quantize in place
    groups = ext.param_groups(model, cfg)  # extra optimiser groups (own lrs); the rest: cfg's lr / weight decay
    loss = task_loss + ext.penalty(model)  # every training step
    ext.after_step(model)                  # after every optimiser step (an optimiser step post-hook)
    ext.average_bits(model)                # every epoch: a budgeted quantity (None: no budget), for selection
    ext.summary(model)                     # once, on the selected model after one evaluation pass of it (node
                                           # tasks): JSON-able report (SeedResult)

Registration: a package declares an entry point in the group ``gnn.training_extensions`` whose object is a
callable with no arguments that calls `register` for each of its methods (the quant package:
``quant = "quant.qat.training_hooks:register"`` in pyproject.toml). The entry points are loaded on the first lookup,
so ``gnn`` never imports them by name; `register` can also be called directly (tests, scripts).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from torch import Tensor, nn

    from gnn.data.loaders import GraphData

ENTRY_POINT_GROUP = "gnn.training_extensions"
FP32 = "none"  # the trainer's own method: no extension

_registry: dict[str, TrainingExtension] = {}
_entry_points_loaded = False


@runtime_checkable
class TrainingExtension(Protocol):
    """What the trainer calls for one training method (``cfg`` is the run's `gnn.trainer.TrainConfig`).

    Attributes:
        learns_bits: the method learns a budgeted quantity (learned bitwidths): `average_bits` returns it and
            the presets give the method their learned-bits recipe (gnn/presets.py).
    """

    learns_bits: bool

    def validate(self, cfg: Any) -> None:
        """Raise ValueError naming what is wrong with ``cfg``'s settings for this method."""

    def prepare(self, model: nn.Module, graph: GraphData, cfg: Any) -> nn.Module:
        """Turn the built (maybe FP32-warmed-up) model into the one to train; may work in place."""

    def param_groups(self, model: nn.Module, cfg: Any) -> list[dict]:
        """Optimiser groups of parameters with their own settings; the others train with cfg's lr and decay."""

    def penalty(self, model: nn.Module) -> Tensor | float:
        """A term added to the task loss at every training step (0: none)."""

    def after_step(self, model: nn.Module) -> None:
        """Called after every optimiser step (e.g. projecting learned bits onto their budget)."""

    def average_bits(self, model: nn.Module) -> float | None:
        """The budgeted average (compared with ``cfg.target_bits`` in model selection), or None: no budget."""

    def summary(self, model: nn.Module) -> dict:
        """A JSON-able report on the trained model (``SeedResult.quant_summary``)."""


def register(name: str, extension: TrainingExtension, *, replace: bool = False) -> None:
    """Make ``extension`` the one of method ``name`` (``TrainConfig.quant`` / ``--quant``)."""
    if name == FP32:
        raise ValueError(f"register: {FP32!r} is the trainer's own FP32 method; choose another name")
    if not isinstance(extension, TrainingExtension):
        raise TypeError(f"register: {type(extension).__name__} lacks part of gnn.hooks.TrainingExtension")
    if name in _registry and _registry[name] is not extension and not replace:
        raise ValueError(f"register: a training extension is already registered as {name!r}; pass replace=True")
    _registry[name] = extension


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True  # before loading: a plugin that looks a name up while registering does not recurse
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()()
        except Exception as e:
            raise ImportError(f"training extension {ep.name!r} ({ep.value}, entry point group "
                              f"{ENTRY_POINT_GROUP}) failed to load: {type(e).__name__}: {e}") from e


def registered() -> tuple[str, ...]:
    """The registered method names, in registration order (entry points loaded first)."""
    _load_entry_points()
    return tuple(_registry)


def methods() -> tuple[str, ...]:
    """Every valid ``TrainConfig.quant``: ``"none"`` and the registered methods."""
    return (FP32, *registered())


def get(name: str) -> TrainingExtension:
    """The extension of method ``name``; ValueError listing the valid names if none is registered."""
    _load_entry_points()
    if name in _registry:
        return _registry[name]
    hint = "" if _registry else (f" (no training extension is registered: install the project, `pip install -e .`, "
                                 f"so that its {ENTRY_POINT_GROUP} entry points are found)")
    raise ValueError(f"unknown quant {name!r}; valid: {', '.join(methods())}{hint}")


def extension_for(name: str) -> TrainingExtension | None:
    """None for the FP32 method ``"none"``, else `get`."""
    return None if name == FP32 else get(name)
