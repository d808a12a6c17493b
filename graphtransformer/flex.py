"""Block-sparse topology attention through FlexAttention (GPU), exact on the graph's edges.

FlexAttention computes attention tile by tile and skips the (query block, key block) tiles that a ``BlockMask``
leaves out. For a graph the useful tiles are few once the nodes are in METIS cluster order: edges concentrate in
the blocks of one cluster. Which elements *inside* a tile attend is the graph's adjacency, kept as a bitmask per
non-empty tile, so the result is exactly topology attention (not TorchGT's random 16x16 blocks):

* ``slot_table`` (nb, nb) int32: slot of tile (query block, key block) in ``bits``, -1 for a tile computed elsewhere;
  nb = ceil(N / block). Memory 4 nb^2 bytes (268 MB at one million nodes and block 128).
* ``bits`` (S, block, block / 32) int32: bit ``c % 32`` of word ``c // 32`` in row r of slot s is set when key
  ``kb * block + c`` -> query ``qb * block + r`` is an edge. 16 bytes per row, 2 KiB per tile at block 128.
* ``mask_mod(b, h, q, kv) = slot >= 0 and bit set``; the BlockMask lists the tiles with a slot. Its index tables
  are nb x nb int32 too (FlexAttention's layout), so a plan holds about 12 nb^2 bytes besides the bitmasks.

Tiles with fewer than ``min_tile_edges`` edges would cost a whole block x block tile for a handful of edges; those
edges go to the edge-list kernel (:func:`graphtransformer.edge_attention.fused_sparse_attention`) instead, and the
two partial results merge exactly through their log-sum-exp (:func:`graphtransformer.attention.merge_attention`),
as the CPU cluster-blocked kernel does with its dense tiles. ``min_tile_edges=1`` sends every edge to FlexAttention.

On CUDA the kernel is ``torch.compile(flex_attention)`` (fused forward and backward). On CPU FlexAttention runs
unfused and forward only (PyTorch materialises the scores and has no CPU backward): enough to test the masks.

Shapes: q, k, v (H, N, D) in the caller's node order -> out (H, N, D), lse (H, N); edge_index (2, E) with row 0 =
source (key), row 1 = target (query). Rows without edges get out = 0 and lse = -inf.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from graphtransformer.attention import merge_attention
from graphtransformer.cluster import metis_relabeling
from graphtransformer.edge_attention import fused_sparse_attention

WORD_BITS = 32
MIN_HEAD_DIM = 16


@dataclass(frozen=True, kw_only=True)
class FlexConfig:
    """block_size: FlexAttention tile (a multiple of 32); min_tile_edges: tiles with fewer edges go to the
    edge-list kernel (32 of 16384 entries at block 128: a sparser tile costs more as a dense tile than its edges
    cost in the edge list; ``benchmarks/gt_attention.py --flex-min-edges`` measures the choice); num_clusters: METIS
    clusters of the node order (1 = keep the caller's order, e.g. already clustered)."""

    block_size: int = 128
    min_tile_edges: int = 32
    num_clusters: int = 1
    seed: int = 0

    def __post_init__(self):
        if self.block_size < WORD_BITS or self.block_size % WORD_BITS:
            raise ValueError(f"FlexConfig: block_size={self.block_size}; use a multiple of {WORD_BITS} (e.g. 128)")
        if self.min_tile_edges < 1:
            raise ValueError(f"FlexConfig: min_tile_edges={self.min_tile_edges}; use >= 1 (1 = all edges in tiles)")
        if self.num_clusters < 1:
            raise ValueError(f"FlexConfig: num_clusters={self.num_clusters}; use >= 1")


@dataclass(frozen=True)
class FlexPlan:
    """Tiles, bitmasks and the edge-list remainder of one graph, in the (optionally METIS-) reordered node ids."""

    num_nodes: int
    block_size: int
    order: Tensor | None  # (N,) original id at each reordered position; None = identity
    inverse: Tensor | None  # (N,) reordered position of each original id
    block_mask: BlockMask  # over the padded sequence ceil(N / block) * block
    slot_table: Tensor  # (nb, nb) int32
    bits: Tensor  # (S, block, block / 32) int32
    rest_edges: Tensor  # (2, E_rest) reordered ids, edges of tiles under min_tile_edges
    tile_edges: int  # edges inside the tiles (set bits of ``bits``)

    @property
    def num_tiles(self) -> int:
        return int(self.bits.shape[0])

    @property
    def tile_edge_fraction(self) -> float:
        """Share of the edges computed inside FlexAttention tiles."""
        total = self.tile_edges + int(self.rest_edges.shape[1])
        return self.tile_edges / total if total else 0.0

    def to(self, device) -> FlexPlan:
        move = (lambda t: None if t is None else t.to(device))  # noqa: E731
        table, bits = self.slot_table.to(device), self.bits.to(device)
        mask = BlockMask.from_kv_blocks(self.block_mask.kv_num_blocks.to(device),
                                        self.block_mask.kv_indices.to(device), BLOCK_SIZE=self.block_size,
                                        mask_mod=_graph_mask_mod(table, bits, self.block_size),
                                        seq_lengths=self.block_mask.seq_lengths)
        return FlexPlan(self.num_nodes, self.block_size, move(self.order), move(self.inverse), mask, table, bits,
                        self.rest_edges.to(device), self.tile_edges)


def _graph_mask_mod(slot_table: Tensor, bits: Tensor, block: int):
    """mask_mod(b, h, q_idx, kv_idx) -> bool: the tile has a slot and its bitmask holds the edge kv -> q."""

    def mask_mod(b, h, q_idx, kv_idx):
        slot = slot_table[q_idx // block, kv_idx // block]
        col = kv_idx % block
        word = bits[slot, q_idx % block, col // WORD_BITS]  # slot -1 reads a real tile; masked out below
        return (slot >= 0) & (((word >> (col % WORD_BITS)) & 1) == 1)

    return mask_mod


def build_flex_plan(edge_index: Tensor, num_nodes: int, cfg: FlexConfig = FlexConfig()) -> FlexPlan:
    """Reorder (METIS when ``cfg.num_clusters > 1``), tile, and split the edges between FlexAttention tiles and
    the edge-list remainder. Runs on ``edge_index``'s device. Duplicate edges are counted once."""
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"build_flex_plan: edge_index must be (2, E); got {tuple(edge_index.shape)}")
    if num_nodes < 1:
        raise ValueError(f"build_flex_plan: num_nodes={num_nodes}; a graph needs at least one node")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise ValueError(f"build_flex_plan: edge_index holds ids outside [0, {num_nodes}); relabel the edges or pass "
                         "the right num_nodes")
    device, block = edge_index.device, cfg.block_size
    order = inverse = None
    src, dst = edge_index[0].long(), edge_index[1].long()
    if cfg.num_clusters > 1:
        order, inverse = metis_relabeling(edge_index.cpu(), num_nodes, cfg.num_clusters, cfg.seed)
        order, inverse = order.to(device), inverse.to(device)
        src, dst = inverse[src], inverse[dst]
    nb = -(-num_nodes // block)
    padded = nb * block
    pair = torch.unique(dst * padded + src)  # coalesced edges, sorted by (dst, src)
    dst, src = pair // padded, pair % padded
    tile = (dst // block) * nb + src // block  # (E,) tile id, row-major over (query block, key block)
    tiles, tile_of_edge, tile_edges = torch.unique(tile, return_inverse=True, return_counts=True)
    kept = tile_edges >= cfg.min_tile_edges  # (T,) tiles computed by FlexAttention
    slot_of_tile = torch.cumsum(kept, 0) - 1  # (T,) slot among kept tiles (valid where kept)
    in_tile = kept[tile_of_edge]  # (E,)
    kept_tiles = tiles[kept]
    q_block, k_block = kept_tiles // nb, kept_tiles % nb
    num_slots = int(kept_tiles.numel())

    slot_table = torch.full((nb, nb), -1, dtype=torch.int32, device=device)
    slot_table[q_block, k_block] = torch.arange(num_slots, dtype=torch.int32, device=device)
    # Each word's value is the sum of its distinct set bits (edges are unique), accumulated in int64 so that bit 31
    # cannot overflow, then stored as int32 (two's complement keeps every bit).
    words_per_row = block // WORD_BITS
    e_src, e_dst = src[in_tile], dst[in_tile]
    col = e_src % block
    word_id = ((slot_of_tile[tile_of_edge[in_tile]] * block + e_dst % block) * words_per_row + col // WORD_BITS)
    words, word_of_edge = torch.unique(word_id, return_inverse=True)
    value = torch.zeros(words.numel(), dtype=torch.int64, device=device)
    value.index_add_(0, word_of_edge, torch.ones_like(col) << (col % WORD_BITS))
    bits = torch.zeros((num_slots, block, words_per_row), dtype=torch.int32, device=device)
    bits.view(-1)[words] = value.to(torch.int32)

    # BlockMask in FlexAttention's layout: per query block the number of key blocks and their indices. The index
    # table must be nb wide (BlockMask derives the number of key blocks from it to build its transpose).
    kv_num = torch.bincount(q_block, minlength=nb).to(torch.int32)  # (nb,)
    row_start = torch.cumsum(kv_num, 0) - kv_num  # (nb,) first slot of each query block (slots are row-major)
    kv_indices = torch.zeros((nb, nb), dtype=torch.int32, device=device)
    kv_indices[q_block, torch.arange(num_slots, device=device) - row_start[q_block]] = k_block.to(torch.int32)
    mask = BlockMask.from_kv_blocks(kv_num[None, None], kv_indices[None, None], BLOCK_SIZE=block,
                                    mask_mod=_graph_mask_mod(slot_table, bits, block), seq_lengths=(padded, padded))
    rest = torch.stack([src[~in_tile], dst[~in_tile]])
    return FlexPlan(num_nodes, block, order, inverse, mask, slot_table, bits, rest, int(e_src.numel()))


@functools.cache
def _compiled_flex():
    return torch.compile(flex_attention, dynamic=False)


def _flex(q: Tensor, k: Tensor, v: Tensor, mask: BlockMask, scale: float) -> tuple[Tensor, Tensor]:
    """(1, H, P, D) inputs -> out (1, H, P, D), natural-log lse (1, H, P); fused on CUDA, unfused elsewhere.

    Head dims under 16 (FlexAttention's smallest matrix tile) are zero-padded: zero q/k columns add nothing to a
    score and zero v columns give output columns that are cut off again.
    """
    head_dim = q.shape[-1]
    if head_dim < MIN_HEAD_DIM:
        q, k, v = (torch.nn.functional.pad(t, (0, MIN_HEAD_DIM - head_dim)) for t in (q, k, v))
    fn = _compiled_flex() if q.is_cuda else flex_attention
    try:
        from torch.nn.attention.flex_attention import AuxRequest
    except ImportError:  # PyTorch < 2.9: the older keyword
        out, lse = fn(q, k, v, block_mask=mask, scale=scale, return_lse=True)
    else:
        out, aux = fn(q, k, v, block_mask=mask, scale=scale, return_aux=AuxRequest(lse=True))
        lse = aux.lse
    return out[..., :head_dim], lse


def flex_graph_attention(q: Tensor, k: Tensor, v: Tensor, plan: FlexPlan,
                         scale: float | None = None) -> tuple[Tensor, Tensor]:
    """Topology attention: FlexAttention over the plan's tiles, edge-list kernel for the rest, LSE merge.

    Shapes: q, k, v (H, N, D) in original node order -> out (H, N, D), lse (H, N). ``plan`` must live on q's
    device (:meth:`FlexPlan.to`).
    """
    num_heads, n, head_dim = q.shape
    if not q.is_cuda and torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        raise RuntimeError("flex_graph_attention: PyTorch's FlexAttention has no CPU backward pass; train the "
                           "'flex' kind on a GPU, or use 'cluster' or 'sparse' (the same attention) on CPU")
    if n != plan.num_nodes:
        raise ValueError(f"flex_graph_attention: q has {n} rows but the plan was built for {plan.num_nodes} nodes")
    scale = head_dim ** -0.5 if scale is None else float(scale)
    if plan.order is not None:
        q, k, v = q[:, plan.order], k[:, plan.order], v[:, plan.order]
    padded = plan.slot_table.shape[0] * plan.block_size
    pad = (0, 0, 0, padded - n)  # pad the node dimension; padded rows have no edges (out 0, lse -inf)
    qp, kp, vp = (torch.nn.functional.pad(t, pad).unsqueeze(0) for t in (q, k, v))
    parts = []
    if plan.num_tiles:
        out, lse = _flex(qp, kp, vp, plan.block_mask, scale)
        parts.append((out[0, :, :n], lse[0, :, :n]))
    if plan.rest_edges.shape[1] or not parts:
        parts.append(fused_sparse_attention(q, k, v, plan.rest_edges, scale))
    out, lse = parts[0] if len(parts) == 1 else merge_attention(*parts[0], *parts[1])
    if plan.inverse is not None:
        out, lse = out[:, plan.inverse], lse[:, plan.inverse]
    return out, lse
