"""The architecture registry: one :class:`~quant.archs.spec.ArchSpec` per architecture, found by name.

Every per-architecture part after FP32 training (quantization points, converter, integer golden model, export
arrays, reader, accelerator dataflow) lives in its folder ``quant/archs/<folder>/`` (see :mod:`quant.archs.spec`
for the convention). Adding an architecture is one folder plus one line in :data:`FOLDERS`, or, for a package of
your own, one call to :func:`register` (``docs/quant.md`` walks through a toy one). Numpy only: ``hw/`` reads it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gnn.registry import Registry
from quant.archs.spec import AGGREGATION_FIRST, CONFIG_ORDER, ArchSpec

FOLDERS = ("gcn", "sage", "gin", "gat", "transformer")  # the built-in architectures, one folder each

ARCHS: Registry[ArchSpec] = Registry("architecture")  # name -> spec, in registration order


def register(spec: ArchSpec) -> ArchSpec:
    """Add ``spec`` to the registry (a second spec of the same name is refused)."""
    return ARCHS.register(spec.name, spec)


def unregister(name: str) -> None:
    """Remove a registered architecture (tests that add a toy one clean up with this)."""
    ARCHS.unregister(name)


for _folder in FOLDERS:
    register(importlib.import_module(f"{__name__}.{_folder}").SPEC)


def spec(name: str) -> ArchSpec:
    """The spec of a registered architecture; ValueError naming the known ones otherwise."""
    return ARCHS.lookup(name)


def reader(name: str) -> ModuleType:
    """The numpy-only reader module of a registered architecture (imported on first use)."""
    return spec(name).module("reader")


def integer_archs() -> dict[str, ArchSpec]:
    """The architectures whose exports carry an integer path."""
    return {n: s for n, s in ARCHS.items() if s.integer_path}


def archs_with_dataflow(dataflow: str) -> tuple[str, ...]:
    """The architectures the accelerator model runs with ``dataflow`` (e.g. :data:`AGGREGATION_FIRST`)."""
    return tuple(n for n, s in ARCHS.items() if s.dataflow == dataflow)


__all__ = ["AGGREGATION_FIRST", "ARCHS", "CONFIG_ORDER", "FOLDERS", "ArchSpec", "archs_with_dataflow",
           "integer_archs", "reader", "register", "spec", "unregister"]
