"""The quantization methods as `gnn.hooks.TrainingExtension` s of the FP32 trainer (`gnn.trainer`).

``register`` is the entry point ``quant`` of the group ``gnn.training_extensions`` (pyproject.toml): the trainer
loads it on its first lookup of a ``--quant`` method and never imports ``quant`` itself. One extension per
method of `quant.qat.config.METHODS` (a2q, degree-aware, dq-int8, dq-int4):

* ``validate``: the quantization settings of a ``TrainConfig`` are checked by the `QuantConfig` they map to
  (`quant_config_from`), the one place of those rules;
* ``prepare``: `quant.qat.api.quantize_` with the node task's graph (None for graph tasks);
* ``param_groups`` / ``penalty`` / ``after_step``: `quant.qat.api.quant_param_groups`, `quant.qat.api.quant_penalty` and
  `quant.qat.api.enforce_bit_budget_` (the projection of the learned bits onto ``target_bits``, quant/qat/budget.py);
* ``average_bits``: the stored average feature bits of learned-bit methods (model selection prefers epochs
  within ``target_bits``); ``summary``: `quant.qat.api.quant_summary`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torch import Tensor, nn

from gnn import hooks
from quant.qat.api import (
    enforce_bit_budget_,
    hardware_cost_of,
    memory_kb,
    quant_config_of,
    quant_param_groups,
    quant_penalty,
    quant_summary,
    quantize_,
)
from quant.qat.config import METHODS, QuantConfig

if TYPE_CHECKING:
    from gnn.data.loaders import GraphData

def quant_config_from(cfg: Any) -> QuantConfig:
    """The `QuantConfig` of a `gnn.trainer.TrainConfig` (its fields ``quant``, ``target_bits``, ``penalty_weight``,
    ``bits_control``, ``quantize_mlp_hidden``, ``weight_bits``, ``xw_bits``, ``learn_xw_bits``, ``hw_*``);
    ValueError as QuantConfig says."""
    return QuantConfig(method=cfg.quant, target_bits=cfg.target_bits, penalty_weight=cfg.penalty_weight,
                       bits_control=cfg.bits_control, quantize_mlp_hidden=cfg.quantize_mlp_hidden,
                       weight_bits=cfg.weight_bits, xw_bits=cfg.xw_bits,
                       learn_xw_bits=cfg.learn_xw_bits, hw_cost=cfg.hw_cost,
                       hw_arch=cfg.hw_arch, hw_config=cfg.hw_config, hw_budget=cfg.hw_budget)


@dataclass(frozen=True)
class QuantExtension:
    """The training hooks of one quantization method."""

    method: str

    @property
    def learns_bits(self) -> bool:
        return not QuantConfig(method=self.method).is_dq  # A2Q and degree-aware learn per-row bitwidths

    def validate(self, cfg: Any) -> None:
        quant_config_from(cfg)

    def prepare(self, model: nn.Module, graph: GraphData, cfg: Any) -> nn.Module:
        return quantize_(model, quant_config_from(cfg), graph.data if graph.task == "node" else None)

    def param_groups(self, model: nn.Module, cfg: Any) -> list[dict]:
        return quant_param_groups(model, quant_config_of(model), cfg.lr)

    def penalty(self, model: nn.Module) -> Tensor:
        return quant_penalty(model)

    def after_step(self, model: nn.Module) -> None:
        enforce_bit_budget_(model)

    def average_bits(self, model: nn.Module) -> float | None:
        """Average stored feature bits (without the sign bit) of a learned-bit model, else None."""
        if not self.learns_bits:
            return None
        hw = hardware_cost_of(model)
        if hw is not None:  # the cost in target-bit units: within budget iff C <= B
            return hw.target_bits * hw.budget_ratio()
        m, elems_kb = memory_kb(model, rounded=True)
        return None if m is None or elems_kb == 0 else float(m.detach()) / elems_kb

    def summary(self, model: nn.Module) -> dict:
        return quant_summary(model)


def register() -> None:
    """Register every quantization method with the trainer (the ``gnn.training_extensions`` entry point)."""
    for method in METHODS:
        hooks.register(method, QuantExtension(method), replace=True)
