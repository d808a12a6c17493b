"""Model stacks: one `GNN` class owns depth, normalisation, dropout, residuals and pooling; each architecture
adds one `make_conv` hook. Models are single-device references: quantization and distribution are applied
to a built model afterwards (``quant.quantize_``, ``distributed``), never inside these files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import global_add_pool, global_mean_pool

from gnn.conv import GATConv, GCNConv, GINConv, SAGEConv
from gnn.conv.gin import gin_mlp
from gnn.conv.linear import Linear
from gnn.registry import Registry


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Architecture of a GNN.

    Attributes:
        arch: layer type, a name of ``CONVS`` (``gcn``, ``gin``, ``gat``, ``sage`` or one registered).
        in_dim: input feature width; out_dim: number of classes.
        hidden_dim: hidden width (for GAT: width per head).
        num_layers: number of message-passing layers (>= 1).
        dropout: node tasks: dropout on the input of every layer; graph tasks: dropout in the readout head
            only (as in the GIN paper; dropping one-hot atom types of small molecules destroys them).
        norm: normalisation after each hidden layer.
        residual: add the layer input to its output where widths match.
        heads: GAT heads of the hidden layers; out_heads: heads of the last layer (averaged).
        attn_dropout: GAT dropout on attention coefficients.
        pool: ``"none"`` for node tasks; ``"sum"``/``"mean"`` for graph tasks (readout of every layer,
            concatenated, then a two-layer head, as in the GIN paper).
        readout_input: graph tasks: also pool the input features into the readout (the GIN paper's readout
            runs over every iteration "including k = 0", Xu et al. 2019, Eq. 4.2).
        head: graph tasks: ``"mlp"`` concatenates the readouts into Linear -> ReLU -> Dropout -> Linear;
            ``"linear-sum"`` is the GIN paper's prediction: one Linear per readout to class scores, each dropped
            out, summed (powerful-gnns ``graphcnn.py``). With sum pooling over graphs of hundreds of nodes the
            readouts are large and the MLP head's ReLU units die in the first steps (PROTEINS GIN: majority class).
    """

    arch: str
    in_dim: int
    out_dim: int
    hidden_dim: int = 16
    num_layers: int = 2
    dropout: float = 0.5
    norm: Literal["none", "batch", "layer"] = "none"
    residual: bool = False
    heads: int = 8
    out_heads: int = 1
    attn_dropout: float = 0.6
    pool: Literal["none", "sum", "mean"] = "none"
    readout_input: bool = False
    head: Literal["mlp", "linear-sum"] = "mlp"

    def __post_init__(self) -> None:
        if self.arch not in CONVS:
            raise ValueError(f"ModelConfig: unknown arch {self.arch!r}; valid: {', '.join(CONVS)}")
        if self.num_layers < 1:
            raise ValueError(f"ModelConfig: num_layers={self.num_layers}; need >= 1")
        if min(self.in_dim, self.out_dim, self.hidden_dim, self.heads, self.out_heads) < 1:
            raise ValueError("ModelConfig: in_dim, out_dim, hidden_dim, heads and out_heads must be >= 1")
        if not 0.0 <= self.dropout < 1.0 or not 0.0 <= self.attn_dropout < 1.0:
            raise ValueError("ModelConfig: dropout and attn_dropout must be in [0, 1)")
        if self.norm not in ("none", "batch", "layer"):
            raise ValueError(f"ModelConfig: unknown norm {self.norm!r}; valid: none, batch, layer")
        if self.pool not in ("none", "sum", "mean"):
            raise ValueError(f"ModelConfig: unknown pool {self.pool!r}; valid: none, sum, mean")
        if self.head not in ("mlp", "linear-sum"):
            raise ValueError(f"ModelConfig: unknown head {self.head!r}; valid: mlp, linear-sum")


@dataclass(frozen=True, kw_only=True)
class ConvSpec:
    """One architecture's message-passing layer, as :class:`GNN` builds it (the FP32 side of an architecture; what
    follows training is ``quant.archs``, keyed by the same name)."""

    name: str  # ModelConfig.arch
    layer: type[nn.Module]  # the conv class (quantization finds a model's layers by it)
    build: Callable[[ModelConfig, int, int, bool], nn.Module]  # (cfg, in_dim, out_dim, is_last) -> layer
    activation: Literal["relu", "elu"] = "relu"  # between layers
    multi_head: bool = False  # hidden width = hidden_dim * heads (hidden layers concatenate heads)


CONVS: Registry[ConvSpec] = Registry("arch")  # arch name -> spec: the one table of FP32 layer types


def register_conv(spec: ConvSpec) -> ConvSpec:
    """Make ``spec.name`` a valid ``ModelConfig.arch`` (a second spec of the same name is refused)."""
    return CONVS.register(spec.name, spec)


def unregister_conv(name: str) -> None:
    """Remove a registered layer type (tests that add a toy one clean up with this)."""
    CONVS.unregister(name)


def _gin(cfg: ModelConfig, in_dim: int, out_dim: int, is_last: bool) -> nn.Module:
    # The MLP's inner width is the model's hidden width, also in the last node-level layer: an inner width
    # of out_dim (the class count) put a C-wide BatchNorm+ReLU bottleneck before the logits (Cora: 63%).
    return GINConv(in_dim, out_dim, mlp=gin_mlp(in_dim, out_dim, cfg.hidden_dim), train_eps=True)


def _gat(cfg: ModelConfig, in_dim: int, out_dim: int, is_last: bool) -> nn.Module:
    # out_dim is the total output width: hidden layers concatenate cfg.heads heads, the last node-level layer
    # averages cfg.out_heads heads
    if is_last and cfg.pool == "none":
        return GATConv(in_dim, out_dim, heads=cfg.out_heads, concat=False, dropout=cfg.attn_dropout)
    return GATConv(in_dim, out_dim // cfg.heads, heads=cfg.heads, dropout=cfg.attn_dropout)


for _spec in (ConvSpec(name="gcn", layer=GCNConv, build=lambda cfg, i, o, last: GCNConv(i, o)),
              ConvSpec(name="gin", layer=GINConv, build=_gin),
              ConvSpec(name="gat", layer=GATConv, build=_gat, activation="elu", multi_head=True),
              ConvSpec(name="sage", layer=SAGEConv, build=lambda cfg, i, o, last: SAGEConv(i, o))):
    register_conv(_spec)


def make_conv(cfg: ModelConfig, in_dim: int, out_dim: int, is_last: bool) -> nn.Module:
    """The layer of ``cfg.arch`` mapping ``in_dim`` to ``out_dim`` (its :class:`ConvSpec`'s ``build``)."""
    return CONVS[cfg.arch].build(cfg, in_dim, out_dim, is_last)


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout that also takes sparse COO input (dropping stored values is dense dropout: zeros stay zero)."""
    if x.is_sparse:
        x = x.coalesce()
        return torch.sparse_coo_tensor(x.indices(), F.dropout(x.values(), p, training), x.shape,
                                       is_coalesced=True, check_invariants=False)
    return F.dropout(x, p=p, training=training)


def _norm(kind: str, dim: int) -> nn.Module:
    return {"none": nn.Identity, "batch": nn.BatchNorm1d, "layer": nn.LayerNorm}[kind](dim)


class GNN(nn.Module):
    """A stack of ``num_layers`` message-passing layers.

    Node tasks (``pool="none"``): the last layer outputs class logits per node.
    Graph tasks: all layers are hidden; every layer's output is pooled per graph, the readouts are
    concatenated and a two-layer head gives class logits per graph.

    Shapes:
        x: (N, F_in), edge_index: (2, E), batch: (N,) graph id per node (graph tasks) ->
        (N, C) for node tasks or (G, C) for graph tasks.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        hidden = cfg.hidden_dim * cfg.heads if CONVS[cfg.arch].multi_head else cfg.hidden_dim
        node_task = cfg.pool == "none"
        dims = [cfg.in_dim] + [hidden] * (cfg.num_layers - 1) + [cfg.out_dim if node_task else hidden]
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        # node tasks: False = this stack drops each layer's input before calling the conv; True = the convs do it
        # themselves (a wrapper that needs the undropped input, e.g. distributed.parallelize.HaloConv)
        self.convs_apply_dropout = False
        for i in range(cfg.num_layers):
            is_last = i == cfg.num_layers - 1
            self.convs.append(make_conv(cfg, dims[i], dims[i + 1], is_last))
            self.norms.append(nn.Identity() if is_last and node_task else _norm(cfg.norm, dims[i + 1]))
        if not node_task:
            widths = dims if cfg.readout_input else dims[1:]  # of the readouts, in order
            if cfg.head == "linear-sum":
                self.readout_heads = nn.ModuleList(Linear(w, cfg.out_dim) for w in widths)
            else:
                self.head = nn.Sequential(Linear(sum(widths), hidden), nn.ReLU(), nn.Dropout(cfg.dropout),
                                          Linear(hidden, cfg.out_dim))

    def reset_parameters(self) -> None:
        for m in self.modules():
            if m is not self and hasattr(m, "reset_parameters"):
                m.reset_parameters()

    def _activation(self, h: Tensor) -> Tensor:
        return F.elu(h) if CONVS[self.cfg.arch].activation == "elu" else F.relu(h)

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor | None = None) -> Tensor:
        cfg = self.cfg
        readouts = [x] if cfg.pool != "none" and cfg.readout_input else []
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms, strict=True)):
            is_last = i == cfg.num_layers - 1
            p = cfg.dropout if cfg.pool == "none" and not self.convs_apply_dropout else 0.0
            h = conv(dropout(x, p, self.training), edge_index)
            if not (is_last and cfg.pool == "none"):
                h = self._activation(norm(h))
                if cfg.residual and h.shape == x.shape:
                    h = h + x
            x = h
            if cfg.pool != "none":
                readouts.append(x)
        if cfg.pool == "none":
            return x
        if batch is None:
            batch = torch.zeros(x.size(0), dtype=torch.long, device=x.device)
        pool = global_add_pool if cfg.pool == "sum" else global_mean_pool
        if cfg.head == "linear-sum":  # sum over readouts of dropout(Linear(pool(h))), each (G, C)
            return sum(F.dropout(lin(pool(r, batch)), cfg.dropout, self.training)
                       for lin, r in zip(self.readout_heads, readouts, strict=True))
        pooled = torch.cat([pool(r, batch) for r in readouts], dim=-1)  # (G, sum of widths)
        return self.head(pooled)


def build_model(cfg: ModelConfig) -> GNN:
    return GNN(cfg)
