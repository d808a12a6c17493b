"""Single-device reference graph transformer over all nodes of a graph as one sequence (node classification).

It knows nothing about distribution: :func:`graphtransformer.parallel.parallelize_graph_transformer` swaps each
layer's :class:`AttentionCore` afterwards, and the model is then called with this rank's rows.

Dual-interleaved attention (TorchGT, SC'24) done as stated, not as released:

* per layer: ``schedule`` names the kernel of every layer, e.g. ``("sparse", "sparse", "dense")``;
* per step: with ``dense_every = n > 0``, every n-th training step (``step % n == n - 1``) runs all layers with
  dense (all-pairs) attention. TorchGT's released loop never advances its step counter, so its schedule never
  switches; :func:`layer_kinds` is a pure function of ``step`` and is tested to alternate.

Kinds: ``dense`` = all-pairs softmax over every node (TorchGT "full"), ``sparse`` = topology attention over the
edges (+ self loops, :mod:`graphtransformer.edge_attention`: nothing per edge kept for the backward pass),
``cluster`` = the same topology attention computed with cluster-blocked tiles, ``flex`` = the same through
FlexAttention block-sparse tiles (:mod:`graphtransformer.flex`; fused on a GPU). Across ranks the topology kinds all
run edge-wise (:mod:`graphtransformer.parallel`).

Input scale. Node features enter through a Glorot-initialised projection; the structural embeddings (degree,
positional encoding) start small (std 0.02, as Graphormer/BERT embeddings). With an N(0, 1) degree embedding (the
``nn.Embedding`` default, norm ~sqrt(hidden) = 8) the projection of row-normalised bag-of-words features (norm
~0.1) was swamped 60x at initialisation, and the model fitted the 140 Cora training nodes through degree/PE
identity instead of features (train loss 0.09, test accuracy 24 %).

Quantization points (identity in FP32, filled by ``quant.quantize_``): ``layers.i.q_input`` (the node features
entering layer i, kind "node"), ``layers.i.attn.q_query`` / ``q_key`` / ``q_value`` (N, hidden) before the head
split, and every weight (``q_weight`` of each :class:`gnn.conv.linear.Linear`).

Shapes: x (N, F_in) dense or sparse COO, pe (N, pe_dim), graph.degree (N,), logits (N, C).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnn.conv.linear import Linear
from gnn.conv.quant_point import QuantPoint
from graphtransformer.attention import flash_dense_attention, sparse_attention
from graphtransformer.cluster import ClusterConfig, ClusterPlan, build_cluster_plan, cluster_blocked_attention
from graphtransformer.edge_attention import fused_sparse_attention
from graphtransformer.flex import FlexConfig, FlexPlan, build_flex_plan, flex_graph_attention
from graphtransformer.positional import degree_index

ATTENTION_KINDS = ("dense", "sparse", "cluster", "flex")
BRANCH_ACTIVATIONS = {"none": nn.Identity, "elu": nn.ELU, "gelu": nn.GELU}


@dataclass(frozen=True, kw_only=True)
class GraphTransformerConfig:
    in_dim: int
    out_dim: int
    hidden_dim: int = 64
    num_heads: int = 4
    num_layers: int = 3
    schedule: tuple[str, ...] = ("sparse", "sparse", "dense")
    dense_every: int = 0  # > 0: every dense_every-th step runs all layers dense (per-step switching)
    dropout: float = 0.1  # on the residual branches and the input embedding
    input_dropout: float = 0.0  # on the raw node features (GCN-style, before the input projection)
    attn_dropout: float = 0.0  # on the edge attention weights of sparse layers (GAT-style), training only
    sparse_residual: bool = True  # False: topology layers replace h by the attention output (GAT-like, no ego
    #                               shortcut around the neighbourhood aggregation; self loops keep the node itself)
    ffn_ratio: int = 2  # feed-forward width = ffn_ratio * hidden_dim; 0 = attention-only layers (no FFN block)
    branch_activation: str = "none"  # on every attention branch's output: "none", "elu" (GAT's nonlinearity
    #                                  between layers) or "gelu"; attention-only layers are otherwise linear but for LN
    layer_scale: float = 0.0  # > 0: every residual branch is scaled by a learned per-channel vector initialised to
    #                           this value (LayerScale, Touvron et al. 2021, CaiT): a small value starts the dense
    #                           layers near the identity; 0 = off (no extra parameters)
    pe_dim: int = 8
    max_degree: int = 64
    degree_embedding: bool = True  # False: no degree embedding at all. With max_degree = 0 the embedding is one
    #                               learned vector added to every node (no degree information, no weight decay)

    def __post_init__(self):
        if self.hidden_dim % self.num_heads:
            raise ValueError(f"GraphTransformerConfig: hidden_dim={self.hidden_dim} is not divisible by "
                             f"num_heads={self.num_heads}; pick a multiple")
        if len(self.schedule) != self.num_layers:
            raise ValueError(f"GraphTransformerConfig: schedule has {len(self.schedule)} entries but num_layers="
                             f"{self.num_layers}; give one attention kind per layer")
        if self.branch_activation not in BRANCH_ACTIVATIONS:
            raise ValueError(f"GraphTransformerConfig: branch_activation={self.branch_activation!r}; valid: "
                             f"{tuple(BRANCH_ACTIVATIONS)}")
        bad = [k for k in self.schedule if k not in ATTENTION_KINDS]
        if bad:
            raise ValueError(f"GraphTransformerConfig: unknown attention kind(s) {bad}; valid: {ATTENTION_KINDS}")
        if self.dense_every < 0 or self.pe_dim < 0 or self.max_degree < 0 or self.ffn_ratio < 0 \
                or self.layer_scale < 0:
            raise ValueError("GraphTransformerConfig: need dense_every >= 0, pe_dim >= 0, max_degree >= 0, "
                             f"ffn_ratio >= 0, layer_scale >= 0 (got layer_scale={self.layer_scale})")
        if not all(0.0 <= p < 1.0 for p in (self.dropout, self.input_dropout, self.attn_dropout)):
            raise ValueError(f"GraphTransformerConfig: dropout={self.dropout}, input_dropout={self.input_dropout}, "
                             f"attn_dropout={self.attn_dropout}; each must be in [0, 1)")


def interleaved_schedule(num_layers: int, dense_period: int = 3) -> tuple[str, ...]:
    """(sparse, ..., sparse, dense) repeated: every ``dense_period``-th layer dense, e.g. 3 -> (s, s, d)."""
    return tuple("dense" if (i + 1) % dense_period == 0 else "sparse" for i in range(num_layers))


def layer_kinds(schedule: tuple[str, ...], step: int | None, dense_every: int) -> tuple[str, ...]:
    """Attention kind of every layer at training step ``step`` (None = evaluation: the layer schedule)."""
    if step is not None and dense_every > 0 and step % dense_every == dense_every - 1:
        return ("dense",) * len(schedule)
    return schedule


@dataclass(frozen=True)
class AttentionGraph:
    """What the attention kernels need from one graph (built once from a PyG edge_index)."""

    num_nodes: int
    edge_index: Tensor  # (2, E + N) coalesced, one self loop per node
    degree: Tensor  # (N,) int64 clipped in-degree (without self loops)
    plan: ClusterPlan | None = None  # for the "cluster" kernel
    flex: FlexPlan | None = None  # for the "flex" kernel

    def to(self, device) -> AttentionGraph:
        """The same graph with its tensors (and the flex plan) on ``device``; the cluster plan moves per call."""
        flex = None if self.flex is None else self.flex.to(device)
        return AttentionGraph(self.num_nodes, self.edge_index.to(device), self.degree.to(device), self.plan, flex)


def attention_graph(edge_index: Tensor, num_nodes: int, *, max_degree: int = 64,
                    cluster: ClusterConfig | None = None, flex: FlexConfig | None = None) -> AttentionGraph:
    """Coalesce, replace self loops by exactly one per node (TorchGT's sparse-attention condition: every node
    attends itself), and precompute degrees and the optional cluster and flex plans (on edge_index's device)."""
    loops = torch.arange(num_nodes, device=edge_index.device).repeat(2, 1)
    ei = torch.cat([edge_index[:, edge_index[0] != edge_index[1]], loops], dim=1)
    ei = torch.unique(ei, dim=1)  # sorted by (src, dst), duplicates dropped
    plan = build_cluster_plan(ei, num_nodes, cluster) if cluster is not None else None
    flex_plan = build_flex_plan(ei, num_nodes, flex) if flex is not None else None
    return AttentionGraph(num_nodes, ei, degree_index(edge_index, num_nodes, max_degree), plan, flex_plan)


class AttentionCore(nn.Module):
    """Kernel dispatch; the single point that :mod:`graphtransformer.parallel` replaces.

    forward(q, k, v (H, N, D), graph, kind) -> out (H, N, D). ``attn_dropout`` applies to sparse layers in
    training mode (the distributed cores do not support it: their tests run with dropout 0).
    """

    def __init__(self, attn_dropout: float = 0.0):
        super().__init__()
        self.attn_dropout = attn_dropout

    def forward(self, q: Tensor, k: Tensor, v: Tensor, graph: AttentionGraph, kind: str) -> Tensor:
        if kind == "dense":
            return flash_dense_attention(q, k, v)[0]
        if kind == "sparse":
            p = self.attn_dropout if self.training else 0.0
            if p > 0.0:  # attention dropout needs the per-edge weights kept for the backward pass
                return sparse_attention(q, k, v, graph.edge_index.to(q.device), dropout_p=p)[0]
            return fused_sparse_attention(q, k, v, graph.edge_index)[0]  # recomputes per-edge terms in backward
        if kind == "cluster":
            if graph.plan is None:
                raise ValueError("AttentionCore: kind 'cluster' needs attention_graph(..., cluster=ClusterConfig())")
            return cluster_blocked_attention(q, k, v, graph.plan)[0]
        if kind == "flex":
            if graph.flex is None:
                raise ValueError("AttentionCore: kind 'flex' needs attention_graph(..., flex=FlexConfig())")
            return flex_graph_attention(q, k, v, graph.flex)[0]
        raise ValueError(f"AttentionCore: unknown kind {kind!r}; valid: {ATTENTION_KINDS}")


class GraphAttention(nn.Module):
    """Multi-head self-attention over the node sequence; the kernel is chosen per call."""

    def __init__(self, hidden_dim: int, num_heads: int, attn_dropout: float = 0.0):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = Linear(hidden_dim, 3 * hidden_dim)
        self.proj = Linear(hidden_dim, hidden_dim)
        self.q_query, self.q_key, self.q_value = (QuantPoint(r, "node") for r in ("query", "key", "value"))
        self.core = AttentionCore(attn_dropout)

    def forward(self, h: Tensor, graph, kind: str) -> Tensor:
        n, f = h.shape
        q, k, v = self.qkv(h).chunk(3, dim=-1)  # 3 x (N, F)
        q, k, v = (p(t).view(n, self.num_heads, f // self.num_heads).transpose(0, 1)  # (H, N, D)
                   for p, t in ((self.q_query, q), (self.q_key, k), (self.q_value, v)))
        out = self.core(q, k, v, graph, kind)  # (H, N, D)
        return self.proj(out.transpose(0, 1).reshape(n, f))


class TransformerLayer(nn.Module):
    """Pre-norm block: h + act(Attn(LN(h))), then h + FFN(LN(h)) (FFN width ``ffn_ratio`` * hidden;
    ``ffn_ratio=0`` drops the FFN block; ``act`` = ``branch_activation``, identity by default). With
    ``sparse_residual=False`` topology layers (sparse / cluster / flex) use h = act(Attn(LN(h))); a layer run with the
    dense kernel (its schedule, or a per-step dense step) keeps the residual. ``layer_scale`` > 0 multiplies each
    residual branch by a learned per-channel vector (``gamma_attn``, ``gamma_ffn``) starting at that value.
    """

    def __init__(self, hidden_dim: int, num_heads: int, dropout: float, attn_dropout: float = 0.0,
                 sparse_residual: bool = True, ffn_ratio: int = 2, branch_activation: str = "none",
                 layer_scale: float = 0.0):
        super().__init__()
        self.act = BRANCH_ACTIVATIONS[branch_activation]()
        self.sparse_residual = sparse_residual
        self.q_input = QuantPoint("input", "node")
        self.norm1 = nn.LayerNorm(hidden_dim)
        self.attn = GraphAttention(hidden_dim, num_heads, attn_dropout)
        if ffn_ratio:
            self.norm2 = nn.LayerNorm(hidden_dim)
            self.ffn = nn.Sequential(Linear(hidden_dim, ffn_ratio * hidden_dim), nn.GELU(),
                                     Linear(ffn_ratio * hidden_dim, hidden_dim))
        else:
            self.norm2 = self.ffn = None
        self.drop = nn.Dropout(dropout)
        self.gamma_attn = nn.Parameter(torch.full((hidden_dim,), layer_scale)) if layer_scale else None
        self.gamma_ffn = nn.Parameter(torch.full((hidden_dim,), layer_scale)) if layer_scale and ffn_ratio else None

    def forward(self, h: Tensor, graph, kind: str) -> Tensor:
        h = self.q_input(h)  # (N, F) node features entering the layer
        a = self.drop(self.act(self.attn(self.norm1(h), graph, kind)))
        if kind == "dense" or self.sparse_residual:
            h = h + (a if self.gamma_attn is None else self.gamma_attn * a)
        else:
            h = a  # GAT-like topology layer: no residual branch to scale
        if self.ffn is None:
            return h
        f = self.drop(self.ffn(self.norm2(h)))
        return h + (f if self.gamma_ffn is None else self.gamma_ffn * f)


def feature_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout on dense or sparse COO node features (N, F_in); sparse ones stay sparse."""
    if not training or p == 0.0:
        return x
    if not x.is_sparse:
        return F.dropout(x, p, True)
    x = x.coalesce()
    return torch.sparse_coo_tensor(x.indices(), F.dropout(x.values(), p, True), x.shape, is_coalesced=True,
                                   check_invariants=False)


class GraphTransformer(nn.Module):
    """Input projection + degree embedding + PE projection -> layers -> LayerNorm -> linear classifier."""

    def __init__(self, cfg: GraphTransformerConfig):
        super().__init__()
        self.cfg = cfg
        self.input = Linear(cfg.in_dim, cfg.hidden_dim)
        self.degree = nn.Embedding(cfg.max_degree + 1, cfg.hidden_dim) if cfg.degree_embedding else None
        if self.degree is not None:
            nn.init.normal_(self.degree.weight, std=0.02)  # small next to the features (module docstring)
        self.pe = nn.Linear(cfg.pe_dim, cfg.hidden_dim, bias=False) if cfg.pe_dim else None
        if self.pe is not None:
            nn.init.normal_(self.pe.weight, std=0.02)
        self.layers = nn.ModuleList(TransformerLayer(cfg.hidden_dim, cfg.num_heads, cfg.dropout, cfg.attn_dropout,
                                                     cfg.sparse_residual, cfg.ffn_ratio, cfg.branch_activation,
                                                     cfg.layer_scale)
                                    for _ in range(cfg.num_layers))
        self.norm = nn.LayerNorm(cfg.hidden_dim)
        self.head = Linear(cfg.hidden_dim, cfg.out_dim)
        self.drop = nn.Dropout(cfg.dropout)

    def layer_kinds(self, step: int | None = None) -> tuple[str, ...]:
        return layer_kinds(self.cfg.schedule, step, self.cfg.dense_every)

    def forward(self, x: Tensor, graph, pe: Tensor | None = None, step: int | None = None) -> Tensor:
        """x (N, F_in), graph with ``.degree`` (N,), pe (N, pe_dim) -> logits (N, C). ``step``: training step
        for per-step switching (None at evaluation)."""
        x = feature_dropout(x, self.cfg.input_dropout, self.training)
        h = self.input(x)
        if self.degree is not None:
            h = h + self.degree(graph.degree.clamp_max(self.cfg.max_degree))
        if self.pe is not None:
            if pe is None:
                raise ValueError("GraphTransformer: cfg.pe_dim > 0 needs pe (N, pe_dim); pass it or set pe_dim=0")
            h = h + self.pe(pe)
        h = self.drop(h)
        for layer, kind in zip(self.layers, self.layer_kinds(step), strict=True):
            h = layer(h, graph, kind)
        return self.head(self.norm(h))
