"""What one architecture is, after FP32 training: :class:`ArchSpec` (numpy only, so ``hw/`` can read it).

An architecture is a folder ``quant/archs/<folder>/`` (or any package of a user's own) whose ``__init__.py``
defines ``SPEC = ArchSpec(...)`` and whose modules follow one convention, imported on first use:

* ``integer``: the integer golden model (numpy); ``graph`` below is its CSR builder;
* ``reader``: ``required_arrays(manifest)``, ``verify(q)`` and, with an integer path, ``integer_model(q)`` of a
  loaded ``.qgraph`` export (numpy);
* ``convert``: the trained, quantized model -> its integer model (torch; the function named by ``converter``);
* ``export``: ``model_arrays(conv, labels, test_index)`` and ``layers_meta(conv)``, the arrays and per-layer
  manifest entries the writer stores.

The FP32 layer itself is the ``gnn.conv`` class whose ``arch`` attribute equals :attr:`ArchSpec.name`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

AGGREGATION_FIRST = "aggregation_first"  # the golden model aggregates the quantized input: no other order is exact
CONFIG_ORDER = "config"  # A (X W) and (A X) W are the same integers: AcceleratorConfig.order chooses
ROLES = ("integer", "reader", "convert", "export")  # the modules of an architecture's package


@dataclass(frozen=True, kw_only=True)
class ArchSpec:
    """One architecture: how it is quantized, converted, exported, read back and run by the accelerator model."""

    name: str  # ``gnn`` conv ``arch`` and the exports' ``model.arch``
    display_name: str  # in messages and tables
    package: str  # the package holding its modules (``quant.archs.<folder>`` for the built-in ones)
    point_schemes: dict[str, str | None] = field(default_factory=dict)  # QuantPoint role -> scheme of node points
    converter: str | None = None  # function of its ``convert`` module; None: tensors only, no integer path
    dataflow: str | None = None  # AGGREGATION_FIRST, CONFIG_ORDER, or None: hw/ does not simulate its layers
    graph: Callable | None = None  # edge_index, N -> the CSR its golden model aggregates over (indptr, indices, slots)
    slot_array: str | None = None  # the export's per-slot array of that CSR
    layer_meta: dict = field(default_factory=dict)  # per-layer manifest keys its readers use, and what each must be
    layer_weights: tuple = ()  # per layer (weight codes, manifest key of their bitwidth, shape from the layer entry)

    @property
    def integer_path(self) -> bool:
        """Whether its exports carry an integer forward path (every built-in arch but the graph transformer)."""
        return self.converter is not None

    def module(self, role: str) -> ModuleType:
        """Its ``role`` module (one of :data:`ROLES`), imported on first use."""
        if role not in ROLES:
            raise ValueError(f"ArchSpec.module: unknown role {role!r}; valid: {', '.join(ROLES)}")
        return importlib.import_module(f"{self.package}.{role}")

    @property
    def golden_model(self) -> str:
        """Dotted name of its integer golden model (recorded in the export's manifest)."""
        return f"{self.package}.integer"

    def convert(self, *args, **kwargs):
        """Run its converter: a trained quantized model -> its converted integer model."""
        if self.converter is None:
            raise ValueError(f"{self.display_name}: no integer path (tensors only), nothing to convert")
        return getattr(self.module("convert"), self.converter)(*args, **kwargs)
