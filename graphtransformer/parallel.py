"""Sequence parallelism for a built :class:`~graphtransformer.model.GraphTransformer`, applied by one function.

Layout over a 2-D DeviceMesh ``("cp", "hp")`` (USP "ulysses-low": the head-parallel group is contiguous ranks):
the node sequence, padded to ``N_pad = ceil(N / W) * W`` rows (W = cp * hp), is cut into W equal chunks and world
rank ``w = cp_idx * hp + hp_idx`` owns chunk ``w`` (n = N_pad / W rows). Row-wise modules (projections, norms,
FFN, head) run on local rows unchanged; only attention communicates:

* dense layers (and sparse ones with ``sparse_comm="ring"``): Ulysses all-to-all over ``hp`` (heads -> ranks,
  so each rank holds block ``cp_idx`` of B = hp * n rows for H / hp heads), then ring attention over ``cp`` with
  the LSE merge, then the inverse all-to-all. ``hp = 1`` is pure ring, ``cp = 1`` pure Ulysses. Padded keys are
  masked out. ``ring_window = w`` makes the ring a Double-Ring (LoongTrain): inner rings of w consecutive cp ranks
  and an outer ring between windows whose K/V hop overlaps the inner ring (``graphtransformer.comm.RingPlan``).
* sparse / cluster layers with ``sparse_comm="halo"`` (communication-light): each rank receives only the K/V rows
  of remote nodes that have an edge into its own rows (sparse all-to-all over the whole world), then runs the
  edge-list kernel locally. Cost ~ cut edges, not N.

Parameters stay replicated and PyTorch's DDP engine (``replicate``, the composable DDP: the model stays a
``GraphTransformer`` with its parameter names) sums their gradients over the world during ``backward``, bucketed
and overlapped with it, through a comm hook that SUMS: the ranks hold different rows of one graph, so their
gradients are partial sums of one loss, not data-parallel replicas to average. Optionally
(:mod:`graphtransformer.sharding`) chosen layers are activation-checkpointed and parameters, gradients and optimizer
state are FSDP2-sharded over the world instead (its reduce-scatter sums them; no DDP then). Order inside
:func:`parallelize_graph_transformer`: attention cores -> activation checkpointing -> FSDP2 or DDP. The model file
never imports ``torch.distributed``; this file does the swap.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed._composable.replicate import replicate
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.nn.parallel import DistributedDataParallel

from distributed.codecs import CODECS
from graphtransformer.attention import dense_attention, sparse_attention
from graphtransformer.comm import (
    CommContext,
    CommCounter,
    HaloPlan,
    halo_exchange,
    head_to_seq,
    ring_attention,
    seq_to_head,
)
from graphtransformer.model import ATTENTION_KINDS, AttentionGraph, GraphTransformer
from graphtransformer.sharding import checkpoint_layers, is_sharded, shard_parameters, world_mesh

SPARSE_COMMS = ("halo", "ring")


@dataclass(frozen=True, kw_only=True)
class SequenceParallelConfig:
    cp: int = 1  # context-parallel (ring) degree
    hp: int = 1  # head-parallel (Ulysses) degree
    sparse_comm: str = "halo"  # how sparse/cluster layers communicate
    fsdp: bool = False  # FSDP2-shard parameters, gradients and optimizer state over all cp * hp ranks
    reshard_after_forward: bool = True  # FSDP2: free gathered parameters after forward (ZeRO-3) or keep (ZeRO-2)
    checkpoint_layers: tuple[int, ...] = ()  # layers whose activations are recomputed in backward
    ring_window: int = 0  # Double-Ring (LoongTrain): inner rings of this many cp ranks; 0 = one ring over cp
    halo_codec: str = "fp32"  # halo K/V rows through a distributed.codecs codec (e.g. "int1"); fp32 = exact
    halo_grad_codec: str = ""  # their gradients on the way back; "" = the same as halo_codec

    def __post_init__(self):
        for c in (self.halo_codec, self.halo_grad_codec or self.halo_codec):
            if c not in CODECS:
                raise ValueError(f"SequenceParallelConfig: unknown halo codec {c!r}; valid: {', '.join(CODECS)}")
        if self.halo_codec != "fp32" and self.sparse_comm != "halo":
            raise ValueError(f"SequenceParallelConfig: halo_codec={self.halo_codec!r} compresses the halo exchange, "
                             f"but sparse_comm={self.sparse_comm!r}; use sparse_comm='halo' or halo_codec='fp32'")
        if self.cp < 1 or self.hp < 1:
            raise ValueError(f"SequenceParallelConfig: cp={self.cp}, hp={self.hp}; both must be >= 1")
        if self.sparse_comm not in SPARSE_COMMS:
            raise ValueError(f"SequenceParallelConfig: sparse_comm={self.sparse_comm!r}; valid: {SPARSE_COMMS}")
        if self.ring_window < 0 or (self.ring_window and self.cp % self.ring_window):
            raise ValueError(f"SequenceParallelConfig: ring_window={self.ring_window} must divide cp={self.cp}; "
                             f"use 0 (one ring) or one of {[d for d in range(1, self.cp + 1) if self.cp % d == 0]}")
        if any(i < 0 for i in self.checkpoint_layers):
            raise ValueError(f"SequenceParallelConfig: checkpoint_layers={self.checkpoint_layers}; use layer "
                             f"indices >= 0")

    @property
    def world_size(self) -> int:
        return self.cp * self.hp


def build_mesh(cfg: SequenceParallelConfig, device_type: str = "cpu") -> DeviceMesh:
    """The ("cp", "hp") mesh; the process group must already be initialised with cp * hp ranks."""
    if not dist.is_initialized():
        raise RuntimeError("build_mesh: call torch.distributed.init_process_group first (torchrun sets the env)")
    world = dist.get_world_size()
    if world != cfg.world_size:
        raise ValueError(f"build_mesh: cp({cfg.cp}) * hp({cfg.hp}) = {cfg.world_size} != WORLD_SIZE({world}); "
                         f"launch {cfg.world_size} processes or change --cp/--hp")
    return init_device_mesh(device_type, (cfg.cp, cfg.hp), mesh_dim_names=("cp", "hp"))


@dataclass(frozen=True)
class ShardedGraph:
    """This rank's view of an :class:`AttentionGraph` under the layout above."""

    num_nodes: int
    num_padded: int
    rows_per_rank: int  # n
    rank: int  # world rank = chunk index
    cp: int
    hp: int
    degree: Tensor  # (n,) local rows (0 on padding)
    halo_plan: HaloPlan
    halo_edges: Tensor  # (2, E_local): dst local row, src in [0, n) local or n + index into the halo rows
    ring_edges: tuple[Tensor, ...]  # per ring owner j: (2, E_cj) block-local (src, dst) of my cp block
    ring_key_valid: tuple[Tensor, ...]  # per ring owner j: (1, B) bool, False on padded keys

    @property
    def row_slice(self) -> slice:
        return slice(self.rank * self.rows_per_rank, (self.rank + 1) * self.rows_per_rank)


def _halo(edge_index: Tensor, n: int, world: int, rank: int) -> tuple[HaloPlan, Tensor]:
    src, dst = edge_index
    own_src, own_dst = src // n, dst // n
    mine = own_dst == rank
    s, d = src[mine], dst[mine] - rank * n
    remote = own_src[mine] != rank
    need = torch.unique(s[remote])  # sorted global ids = grouped by owner in rank order
    recv_counts = torch.bincount(need // n, minlength=world)
    local_src = torch.where(remote, n + torch.searchsorted(need, s), s - rank * n)
    out = (own_src == rank) & (own_dst != rank)
    pairs = torch.unique(torch.stack([own_dst[out], src[out]]), dim=1)  # sorted by (dest rank, node id)
    send_counts = torch.bincount(pairs[0], minlength=world)
    plan = HaloPlan(pairs[1] - rank * n, tuple(send_counts.tolist()), tuple(recv_counts.tolist()))
    return plan, torch.stack([local_src, d])


def shard_graph(graph: AttentionGraph, cfg: SequenceParallelConfig, rank: int) -> ShardedGraph:
    """Precompute everything rank ``rank`` needs (every rank holds the full edge list; features stay sharded)."""
    world = cfg.world_size
    n = -(-graph.num_nodes // world)
    n_pad, block = n * world, n * cfg.hp
    cp_idx = rank // cfg.hp
    degree = torch.zeros(n_pad, dtype=torch.int64)
    degree[: graph.num_nodes] = graph.degree
    plan, halo_edges = _halo(graph.edge_index, n, world, rank)
    src, dst = graph.edge_index
    in_block = dst // block == cp_idx
    ring_edges, key_valid = [], []
    for j in range(cfg.cp):
        sel = in_block & (src // block == j)
        ring_edges.append(torch.stack([src[sel] - j * block, dst[sel] - cp_idx * block]))
        key_valid.append((j * block + torch.arange(block) < graph.num_nodes).unsqueeze(0))
    return ShardedGraph(graph.num_nodes, n_pad, n, rank, cfg.cp, cfg.hp, degree[rank * n:(rank + 1) * n],
                        plan, halo_edges, tuple(ring_edges), tuple(key_valid))


def shard_rows(t: Tensor, sharded: ShardedGraph) -> Tensor:
    """My rows of a per-node tensor (N, ...) -> (n, ...), zero rows for padding."""
    padded = t.new_zeros((sharded.num_padded, *t.shape[1:]))
    padded[: sharded.num_nodes] = t
    return padded[sharded.row_slice]


def unshard_rows(local: Tensor, sharded: ShardedGraph) -> Tensor:
    """All-gather every rank's rows (n, ...) -> (N, ...) (no autograd; for evaluation)."""
    parts = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, local.contiguous())
    return torch.cat(parts)[: sharded.num_nodes]


class DistributedAttentionCore(nn.Module):
    """Drop-in for :class:`~graphtransformer.model.AttentionCore` on local rows: forward(q, k, v (H, n, D),
    sharded, kind) -> (H, n, D)."""

    def __init__(self, mesh: DeviceMesh, layer: str, sparse_comm: str, counter: CommCounter | None,
                 chunk_rows: int = 2048, ring_window: int = 0, halo_codecs: tuple[str, str] = ("fp32", "fp32")):
        super().__init__()
        self.layer, self.sparse_comm, self.counter, self.chunk_rows = layer, sparse_comm, counter, chunk_rows
        self.ring_window, self.halo_codecs = ring_window, halo_codecs
        # Stochastic rounding of the integer codecs: a stream per rank and layer, reproducible under torch.manual_seed,
        # created on the device of the first K/V it rounds (see _codec_generator).
        self.codec_seed = (torch.initial_seed() + 1_000_003 * dist.get_rank() + sum(map(ord, layer))) % 2**63
        self.generator: torch.Generator | None = None
        self.cp_group, self.hp_group = mesh.get_group("cp"), mesh.get_group("hp")
        self.cp_rank, self.hp_rank = mesh.get_local_rank("cp"), mesh.get_local_rank("hp")
        self.cp_size, self.hp_size = mesh.size(0), mesh.size(1)

    def _ctx(self, group, size: int, rank: int) -> CommContext:
        return CommContext(group, size, rank, self.counter, self.layer)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, graph: ShardedGraph, kind: str) -> Tensor:
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"DistributedAttentionCore: unknown kind {kind!r}; valid: {ATTENTION_KINDS}")
        if kind != "dense" and self.sparse_comm == "halo":
            return self._halo(q, k, v, graph)
        return self._ulysses_ring(q, k, v, graph, kind)

    def _halo(self, q: Tensor, k: Tensor, v: Tensor, graph: ShardedGraph) -> Tensor:
        ctx = self._ctx(dist.group.WORLD, dist.get_world_size(), dist.get_rank())
        h, n, d = k.shape
        kv = torch.stack([k, v]).permute(2, 0, 1, 3).reshape(n, 2, h * d)  # rows first; a K and a V row per node
        remote = halo_exchange(kv, graph.halo_plan, ctx, *self.halo_codecs, self._codec_generator(kv.device))
        keys = torch.cat([kv, remote]).view(-1, 2, h, d).permute(1, 2, 0, 3)  # (2, H, n + R, D)
        # The cluster kernel's tiles are a single-device layout; across ranks the same math runs edge-wise.
        return sparse_attention(q, keys[0], keys[1], graph.halo_edges)[0]

    def _codec_generator(self, device: torch.device) -> torch.Generator:
        if self.generator is None or self.generator.device != device:
            self.generator = torch.Generator(device=device).manual_seed(self.codec_seed)
        return self.generator

    def _ulysses_ring(self, q: Tensor, k: Tensor, v: Tensor, graph: ShardedGraph, kind: str) -> Tensor:
        hp = self._ctx(self.hp_group, self.hp_size, self.hp_rank)
        ring = self._ctx(self.cp_group, self.cp_size, self.cp_rank)
        qh, kh, vh = (seq_to_head(t, hp) for t in (q, k, v))  # (H/hp, B, D), my cp block

        def kernel_for(owner: int):
            if kind == "dense":
                valid = graph.ring_key_valid[owner]
                return lambda q_, k_, v_, row0: dense_attention(q_, k_, v_, valid)
            edges = graph.ring_edges[owner]

            def sparse_rows(q_: Tensor, k_: Tensor, v_: Tensor, row0: int):
                sel = (edges[1] >= row0) & (edges[1] < row0 + q_.shape[1])
                rows = torch.stack([edges[0, sel], edges[1, sel] - row0])
                return sparse_attention(q_, k_, v_, rows)
            return sparse_rows

        out = ring_attention(qh, kh, vh, kernel_for, ring, self.chunk_rows, self.ring_window)  # (H/hp, B, D)
        return head_to_seq(out, hp)  # (H, n, D)


def parallelize_graph_transformer(model: GraphTransformer, mesh: DeviceMesh, cfg: SequenceParallelConfig,
                                  counter: CommCounter | None = None, chunk_rows: int = 2048) -> GraphTransformer:
    """Swap every layer's attention core for the distributed one, then checkpoint ``cfg.checkpoint_layers`` and
    FSDP2-shard (``cfg.fsdp``) or DDP-replicate the parameters (in place; returns the model: train by calling it,
    gradients arrive summed after ``backward``). Parameters must already be equal on all ranks (same seed, or
    :func:`broadcast_parameters` first); build the optimizer afterwards."""
    heads = model.cfg.num_heads
    if heads % cfg.hp:
        raise ValueError(f"parallelize_graph_transformer: num_heads={heads} is not divisible by hp={cfg.hp}; "
                         f"use hp in {[d for d in range(1, heads + 1) if heads % d == 0]} and put the rest in cp")
    if mesh.mesh_dim_names != ("cp", "hp"):
        raise ValueError(f"parallelize_graph_transformer: mesh dims {mesh.mesh_dim_names}; build it with build_mesh")
    if model.cfg.attn_dropout > 0:
        raise ValueError(f"parallelize_graph_transformer: attn_dropout={model.cfg.attn_dropout} is single-process "
                         f"only (the distributed kernels cannot drop consistently); build the model with 0")
    if (mesh.size(0), mesh.size(1)) != (cfg.cp, cfg.hp):
        raise ValueError(f"parallelize_graph_transformer: mesh shape {(mesh.size(0), mesh.size(1))} != "
                         f"(cp={cfg.cp}, hp={cfg.hp})")
    if dist.get_world_size() != mesh.size():
        raise ValueError(f"parallelize_graph_transformer: mesh has {mesh.size()} ranks but WORLD_SIZE is "
                         f"{dist.get_world_size()}; the mesh must span the world")
    for i, layer in enumerate(model.layers):
        layer.attn.core = DistributedAttentionCore(mesh, f"layers.{i}", cfg.sparse_comm, counter, chunk_rows,
                                                   cfg.ring_window,
                                                   (cfg.halo_codec, cfg.halo_grad_codec or cfg.halo_codec))
    if cfg.checkpoint_layers:
        checkpoint_layers(model, cfg.checkpoint_layers)
    if cfg.fsdp:
        shard_parameters(model, world_mesh(mesh.device_type), cfg.reshard_after_forward)
    else:
        replicate_parameters(model)
    return model


def broadcast_parameters(model: nn.Module, src: int = 0) -> None:
    """Make every rank start from rank ``src``'s parameters (call before FSDP2 sharding)."""
    for p in model.parameters():
        if is_sharded(p):
            raise ValueError("broadcast_parameters: the model is already FSDP2-sharded; broadcast before "
                             "parallelize_graph_transformer(..., SequenceParallelConfig(fsdp=True))")
        dist.broadcast(p.data, src)


def _sum_allreduce_hook(group, bucket):  # no annotations: DDP checks them as objects, and these would be strings
    """DDP comm hook: the bucket's gradients (a ``dist.GradBucket``) summed over ``group``; a future of the summed
    flat tensor (DDP's default hook would divide by the world size)."""
    fut = dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def replicate_parameters(model: nn.Module) -> nn.Module:
    """Sum ``model``'s gradients over the world with DDP (in place). ``replicate`` keeps the model a
    ``GraphTransformer`` (a subclass) with its state-dict names (no ``module.`` prefix) and, at the first forward,
    builds a :class:`~torch.nn.parallel.DistributedDataParallel` over the parameters only (no buffer is ever
    broadcast). Every parameter gets a gradient in every step, so ``find_unused_parameters`` stays off. gloo CPU
    ranks get ``device_ids=None``, CUDA ranks the parameters' device."""
    replicate(model, device_id=next(model.parameters()).device)
    model.register_comm_hook(dist.group.WORLD, _sum_allreduce_hook)
    return model


def ddp_of(model: nn.Module) -> DistributedDataParallel | None:
    """The DDP engine :func:`replicate_parameters` put on ``model`` (built at its first forward), else None."""
    return getattr(replicate.state(model), "_ddp", None)
