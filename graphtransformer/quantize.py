"""Quantization-aware training of a graph transformer through ``quant.quantize_`` (A2Q, degree-aware, Degree-Quant).

The model already carries :class:`gnn.conv.QuantPoint` modules (identity in FP32): ``layers.i.q_input`` (node
features entering layer i), ``layers.i.attn.q_query`` / ``q_key`` / ``q_value`` (N, hidden) and the ``q_weight`` of
every :class:`gnn.conv.linear.Linear` (input projection, QKV, output projection, FFN, head).

``quantize_`` hooks the ``model(x, edge_index, batch)`` call of the gnn/ models to learn which graph each forward
sees (in-degrees for the degree-aware tables), and calibrates with ``model(data.x, data.edge_index)``. A graph
transformer is called with its attention graph and positional encoding instead, so
:class:`QuantizableGraphTransformer` gives it that signature: it holds the attention graph and the canonical PE
and is called as ``qmodel(x, edge_index, pe=..., step=...)``. Quantizer placement (``quant.qat.plan``): all "node"
points
sit outside any GCN/GAT/GIN/SAGE layer, so each gets the per-node feature scheme (``degree`` buckets for
degree-aware, per-node for A2Q); weights get per-output-channel steps at ``weight_bits``. The raw input features
stay FP32 (they go through ``self.input``, whose weight is quantized; no QuantPoint sits on them).

Single process only (the quantizers' per-node tables are indexed by global node id).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from graphtransformer.model import AttentionGraph, GraphTransformer


class QuantizableGraphTransformer(nn.Module):
    """``forward(x (N, F_in), edge_index (2, E), batch=None, *, pe=None, step=None) -> logits (N, C)``.

    ``edge_index`` is the graph the quant hook reads (in-degrees); attention runs over the stored ``graph``.
    ``pe`` defaults to the canonical encoding given at construction (training may pass a sign-flipped one).
    """

    def __init__(self, model: GraphTransformer, graph: AttentionGraph, pe: Tensor | None):
        super().__init__()
        self.model, self.graph = model, graph
        self.register_buffer("pe", pe if pe is not None else torch.zeros(graph.num_nodes, 0), persistent=False)

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor | None = None, *, pe: Tensor | None = None,
                step: int | None = None) -> Tensor:
        del edge_index, batch  # read by the quantization pre-hook only
        return self.model(x, self.graph, self.pe if pe is None else pe, step=step)


def quantize_graph_transformer(model: GraphTransformer, graph: AttentionGraph, pe: Tensor | None, data,
                               cfg) -> QuantizableGraphTransformer:
    """Wrap ``model`` and apply ``quant.qat.api.quantize_(wrapper, cfg, data)`` (in place on the model's points).

    ``cfg`` is a ``quant.qat.api.QuantConfig``; ``data`` the PyG Data of the node task (x, edge_index).
    """
    from quant.qat.api import quantize_

    if model.cfg.pe_dim and (pe is None or pe.shape != (graph.num_nodes, model.cfg.pe_dim)):
        raise ValueError(f"quantize_graph_transformer: pe must be ({graph.num_nodes}, {model.cfg.pe_dim}) "
                         f"for calibration; got {None if pe is None else tuple(pe.shape)}")
    wrapper = QuantizableGraphTransformer(model, graph, pe)
    quantize_(wrapper, cfg, data)
    return wrapper


def quant_optimizer(qmodel: nn.Module, cfg, lr: float, weight_decay: float) -> tuple[torch.optim.Optimizer,
                                                                                       Callable[[], Tensor]]:
    """AdamW over the model parameters plus the quantizer groups (own lrs, no weight decay), and the memory
    penalty ``() -> scalar`` to add to the loss (zero for Degree-Quant), as gnn/trainer.py does."""
    from quant.qat.api import attach_bit_budget, quant_param_groups, quant_penalty

    qgroups = quant_param_groups(qmodel, cfg, lr)
    qids = {id(p) for g in qgroups for p in g["params"]}
    base = [p for p in qmodel.parameters() if id(p) not in qids]
    opt = torch.optim.AdamW([{"params": base, "lr": lr, "weight_decay": weight_decay}, *qgroups])
    attach_bit_budget(qmodel, opt)  # with bits_control projecting (quant/qat/budget.py); the penalty otherwise
    return opt, lambda: quant_penalty(qmodel)


def train_quantized_seed(model: GraphTransformer, graph: AttentionGraph, pe: Tensor | None, data, split, cfg,
                         seed: int, qcfg, export_to: str | None = None, dataset: str = "") -> dict:
    """One seed of single-process quantization-aware training (``cfg``: graphtransformer.training.TrainConfig,
    ``qcfg``: quant.qat.config.QuantConfig); the record of ``train_seed`` gains the average feature bits (without /
    with the sign bit) of the model after the last epoch. ``export_to``: write that final model's quantized tensors
    there (:func:`quant.archs.transformer.export.export_graph_transformer`)."""
    from graphtransformer.training import single_process_rows, train_seed
    from quant.qat.api import quant_summary

    qmodel = quantize_graph_transformer(model, graph, pe, data, qcfg)
    opt, penalty = quant_optimizer(qmodel, qcfg, cfg.lr, cfg.weight_decay)
    record = train_seed(qmodel, data, split, pe, single_process_rows(data.edge_index), cfg, seed, opt=opt,
                        penalty=penalty)
    summary = quant_summary(qmodel)
    record["final_avg_bits"] = summary.get("avg_bits")
    record["final_avg_bits_with_sign"] = summary.get("avg_bits_with_sign")
    if export_to:
        from quant.archs.transformer.export import export_graph_transformer

        record["export"] = str(export_graph_transformer(qmodel, data, export_to, dataset=dataset,
                                                        provenance={"seed": seed, "weights": "final epoch"}))
    return record
