"""Quantized training (``quant.quantize_``) on a partition-parallel model: per-node quantizer parameters live with
the rank that owns the node.

Order (`shard_quantizers` is called by `distributed.parallelize.parallelize_gnn` when the model is quantized):
  1. ``quantize_(model, QuantConfig(...), data)`` on the built single-device `GNN` with the FULL graph, exactly as
     `gnn.trainer` does: every rank calibrates the same quantizers (one no-grad forward of the whole graph);
  2. ``parallelize_gnn`` wraps the convs; each conv then sees its N_o owned rows followed by N_h halo rows;
  3. `shard_quantizers` re-types the quantizer modules in place (their state is kept):

  * A2Q ``node`` scheme (per-node step and bits): the (N, 1) parameters are cut to the owned rows (N_o, 1) in
    ``Partition.owned`` order. Halo rows are quantized with their OWNER's current values, fetched each forward
    (fp32 ``all_to_all_single`` of (N_h, 2) floats) and detached: with the Local Gradient (the A2Q default for
    node tasks, required here) a row's parameter gradient depends only on that row, which its owner holds too;
  * A2Q ``degree`` scheme (shared table): rows are bucketed by GLOBAL in-degrees (`GraphContext` is pointed at
    the in-degrees of the full graph, indexed by owned + halo ids); only owned rows send gradient to the table,
    whose gradient is then summed over ranks with the weights;
  * A2Q ``channel`` scheme (shared per-column step, Local Gradient = mean over rows): owned rows only, scaled by
    N_o / N so that the sum over ranks is the single-process mean;
  * A2Q ``row`` / ``head`` schemes (weights, GAT heads) take the task gradient of a replicated tensor: unchanged;
  * Degree-Quant: the protection mask is drawn over ALL N nodes from a generator seeded identically on every rank
    (so a node's halo copies share its owner's draw) and indexed by local ids; the observed percentile range is
    the exact percentile over the owned rows of all ranks (`distributed_percentile_range`).

`quant_penalty_local` is A2Q's memory penalty with M summed over ranks; `gather_quantized_model` rebuilds the
single-process quantized model on rank 0 (e.g. for ``quant.export.export_model``).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from distributed import codecs
from distributed.halo import ByteCounter, Transfer
from distributed.partition import Partition
from quant.qat.a2q import A2QQuantizer
from quant.qat.api import KB_BITS, quant_config_of, quant_context_of
from quant.qat.degree_aware import degree_bucket
from quant.qat.degree_quant import DQQuantizer
from quant.qat.graph_context import torch_bool_mask
from quant.qat.quantizers import (
    a2q_fake_quant,
    affine_fake_quant,
    affine_qparams,
    dq_protect_probability,
    round_half_away,
)

SHARDED_ATTR = "_dist_sharded"  # set on per-node Parameters: excluded from the gradient all-reduce


def dq_mask_generator(seed: int) -> torch.Generator:
    """The generator of Degree-Quant protection masks (seeded identically on every rank)."""
    return torch.Generator().manual_seed(seed * 7919 + 17)


class ShardInfo:
    """What the re-typed quantizers of one rank share: partition, global sizes, groups, counters."""

    def __init__(self, part: Partition, global_in_deg: Tensor, group, counter: ByteCounter, seed: int) -> None:
        self.part, self.group, self.counter = part, group, counter
        self.num_nodes = int(global_in_deg.numel())
        self.local_nodes = torch.cat([part.owned, part.halo])  # (N_o + N_h,) global ids
        self.global_in_deg = global_in_deg  # (N,)
        self.local_in_deg = global_in_deg[self.local_nodes]  # (N_o + N_h,)
        self.mask_generator = dq_mask_generator(seed)  # identical on every rank
        self.epoch = 0

    @property
    def num_owned(self) -> int:
        return self.part.num_owned

    def fetch_halo(self, owned_rows: Tensor, layer: int) -> Tensor:
        """Owners' rows of every halo node (full precision, synchronous). Shapes: (N_o, K) -> (N_h, K)."""
        send = [owned_rows.detach()[idx] for idx in self.part.send_index]
        t = Transfer(send, self.part.recv_counts, codecs.lossless_codec(owned_rows.dtype), None, self.group,
                     async_op=False)
        self.counter.add(self.epoch, layer, "qparams", t.num_bytes)
        return t.result().view(-1, owned_rows.size(1))


def grad_scale(t: Tensor, c: float) -> Tensor:
    """Value ``t``, gradient ``c * grad``."""
    return t.detach() + c * (t - t.detach())


class ShardedA2Q(A2QQuantizer):
    """An `A2QQuantizer` (node / degree / channel scheme) on N_o owned + N_h halo rows; see the module docstring."""

    shard: ShardInfo
    fetch_halo: bool  # halo rows feed owned outputs (input, XW); False for aggregation outputs (discarded)

    def _rows_params(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(step, bits) of the owned rows (live) and of the halo rows (detached), each (R, 1) or broadcastable."""
        sh, n_o = self.shard, self.shard.num_owned
        s, b = self._effective_step(), self.effective_bits()
        if self.scheme == "node":
            if self.fetch_halo:
                halo = sh.fetch_halo(torch.cat([s, b], dim=1), self.layer_index)  # (N_h, 2)
                s_h, b_h = halo[:, :1], halo[:, 1:]
            else:  # rows discarded by the conv: any valid value
                s_h = torch.ones(x.size(0) - n_o, 1)
                b_h = torch.full((x.size(0) - n_o, 1), float(self.max_bits))
            return s, b, s_h, b_h
        if self.scheme == "degree":
            idx = degree_bucket(sh.local_in_deg, self.num_buckets, self.bucket_scheme)  # (N_o + N_h,)
            return s[idx[:n_o]], b[idx[:n_o]], s.detach()[idx[n_o:]], b.detach()[idx[n_o:]]
        if self.scheme == "channel":  # local mean over rows: owned share of the global mean
            c = n_o / sh.num_nodes if self.local else 1.0
            return grad_scale(s, c), grad_scale(b, c), s.detach(), b.detach()
        raise RuntimeError(f"ShardedA2Q: scheme {self.scheme!r} is replicated and needs no sharding")

    def forward(self, x: Tensor) -> Tensor:
        n_o = self.shard.num_owned
        if x.size(0) != n_o + self.shard.part.num_halo:
            raise RuntimeError(f"ShardedA2Q({self.point_name}): expected {n_o} owned + {self.shard.part.num_halo} "
                               f"halo rows, got {x.size(0)}; call the model through DistGNN")
        s_o, b_o, s_h, b_h = self._rows_params(x)
        out = torch.cat([a2q_fake_quant(x[:n_o], s_o, b_o, self.local),
                         a2q_fake_quant(x[n_o:], s_h, b_h, self.local)])
        if self.learn_bits:
            b_rows = torch.cat([b_o.expand(n_o, 1), b_h.expand(x.size(0) - n_o, 1)])
            self._record(x, b_rows, None)
        return out

    def owned_memory_bits(self, rounded: bool) -> tuple[Tensor, int]:
        """(bits without sign over the OWNED rows, differentiable; their element count): this rank's share of
        `A2QQuantizer.memory_bits` (``rounded``: stored bits round(b), straight-through)."""
        sign = 1.0 if self.unsigned else 0.0
        n_o = self.shard.num_owned
        if self.scheme == "node":
            b = self.effective_bits().view(-1)
        else:
            idx = degree_bucket(self.shard.local_in_deg[:n_o], self.num_buckets, self.bucket_scheme)
            b = self.effective_bits().view(-1)[idx]
        if rounded:
            b = b + (round_half_away(b.detach()) - b.detach())
        return (b - sign).sum() * self._last_row_elems, b.numel() * self._last_row_elems


def distributed_percentile_range(values: Tensor, pct: float, group=None) -> tuple[Tensor, Tensor]:
    """`quant.qat.quantizers.percentile_range` of the union of every rank's ``values``, exactly.

    Each rank contributes its k smallest and m largest values (k, m: the ranks of the two percentiles in the
    union, known after one all_reduce of the counts), so the union's k-th smallest is among the gathered ones.
    """
    flat = values.detach().reshape(-1).float()
    n = torch.tensor([float(flat.numel())], dtype=torch.float64)
    dist.all_reduce(n, group=group)
    n = int(n.item())
    if pct <= 0 or n < 2:
        lo = flat.min() if flat.numel() else torch.tensor(math.inf)
        hi = flat.max() if flat.numel() else torch.tensor(-math.inf)
        ext = torch.stack([lo, -hi]).reshape(2)
        dist.all_reduce(ext, op=dist.ReduceOp.MIN, group=group)
        return ext[0], -ext[1]
    k_lo = max(1, int(math.ceil(pct * n)))
    k_hi = max(1, min(n, int(math.floor((1.0 - pct) * n)) + 1))
    m_hi = n - k_hi + 1  # the k_hi-th smallest is the m_hi-th largest
    small = torch.sort(flat).values
    low = F.pad(small[:k_lo], (0, max(0, k_lo - small.numel())), value=math.inf)
    high = F.pad(small.flip(0)[:m_hi], (0, max(0, m_hi - small.numel())), value=-math.inf)
    world = dist.get_world_size(group)
    lows, highs = [torch.empty_like(low) for _ in range(world)], [torch.empty_like(high) for _ in range(world)]
    dist.all_gather(lows, low, group=group)
    dist.all_gather(highs, high, group=group)
    return torch.cat(lows).kthvalue(k_lo).values, torch.cat(highs).topk(m_hi).values[-1]


class ShardedDQ(DQQuantizer):
    """A `DQQuantizer` whose range is observed on the owned rows of all ranks (exact global percentile)."""

    shard: ShardInfo

    def _rows(self, x: Tensor) -> Tensor:
        return x[: self.shard.num_owned] if self.kind == "node" else x  # edges: every local edge (see README)

    def _range(self, x: Tensor) -> tuple[Tensor, Tensor]:
        if self.kind == "weight":  # replicated tensor: the local percentile is the global one
            from quant.qat.quantizers import percentile_range

            return percentile_range(x, self.percentile)
        return distributed_percentile_range(x, self.percentile, self.shard.group)

    def forward(self, x: Tensor) -> Tensor:
        mask = self._mask(x)  # (N_o + N_h,) True = protected
        if self.training:
            rows = self._rows(x)
            observed = rows if mask is None else rows[~mask[: rows.size(0)]]
            lo, hi = self._range(observed)
            if math.isfinite(float(lo)) and math.isfinite(float(hi)):
                self.lo.copy_(torch.minimum(self.lo, lo))
                self.hi.copy_(torch.maximum(self.hi, hi))
        if torch.isfinite(self.lo) and torch.isfinite(self.hi):
            lo, hi = self.lo, self.hi
        else:
            lo, hi = self._range(self._rows(x))
        scale, zp, qmin, qmax = affine_qparams(lo, hi, self.num_bits)
        out = affine_fake_quant(x, scale, zp, qmin, qmax)
        if mask is None:
            return out
        return torch.where(mask.view(-1, *([1] * (x.dim() - 1))), x, out)


def _dq_mask_hook(shard: ShardInfo):
    """Forward pre-hook run after quant's: replaces its local mask draw by a draw over all N nodes."""
    def hook(module: nn.Module, args, kwargs):
        ctx, cfg = quant_context_of(module), quant_config_of(module)
        if module.training and cfg.is_dq:
            _, p_low, p_high = cfg.dq_settings()
            p = dq_protect_probability(shard.global_in_deg, p_low, p_high)  # (N,)
            ctx.dq_mask = torch_bool_mask(p, shard.mask_generator)[shard.local_nodes]
        return None
    return hook


def shard_quantizers(model: nn.Module, part: Partition, group, counter: ByteCounter, seed: int) -> ShardInfo:
    """Re-type the quantizers of a quantized, parallelized `GNN` (``model`` = ``DistGNN.module``) in place."""
    cfg, ctx = quant_config_of(model), quant_context_of(model)
    if ctx.in_deg is None or ctx.fixed_num_nodes is None:
        raise ValueError("shard_quantizers: quantize the model with the full graph first: quantize_(model, cfg, "
                         "data) with the node task's data")
    if not cfg.is_dq and cfg.local_gradient == "off":
        raise ValueError("shard_quantizers: per-node quantizers need the Local Gradient across partitions; use "
                         "QuantConfig(local_gradient='auto' or 'on')")
    shard = ShardInfo(part, ctx.in_deg.clone(), group, counter, seed)
    for _, q in list(model.named_modules()):
        if isinstance(q, DQQuantizer):
            q.__class__, q.shard = ShardedDQ, shard
        elif isinstance(q, A2QQuantizer) and q.scheme in ("node", "degree", "channel"):
            q.__class__, q.shard, q.fetch_halo = ShardedA2Q, shard, q.role != "aggregate"
            if q.scheme == "node":
                q.step = nn.Parameter(q.step.data[part.owned].clone())
                q.bits = nn.Parameter(q.bits.data[part.owned].clone())
                setattr(q.step, SHARDED_ATTR, True)
                setattr(q.bits, SHARDED_ATTR, True)
    # the model's graph is now the local one: global in-degrees of owned + halo rows, fixed for the run
    ctx.in_deg, ctx.fixed_num_nodes, ctx.num_nodes = shard.local_in_deg, None, int(shard.local_nodes.numel())
    ctx._fixed_key = part.edge_index
    model.register_forward_pre_hook(_dq_mask_hook(shard), with_kwargs=True)
    return shard


def sharded_quantizers(model: nn.Module) -> list[tuple[str, ShardedA2Q]]:
    return [(n, m) for n, m in model.named_modules() if isinstance(m, ShardedA2Q)]


def quant_penalty_local(model: nn.Module) -> Tensor:
    """This rank's term of A2Q's memory penalty ``a relu(M - target_bits E / 8192)^2`` with M, E summed over ranks.

    Value: the global penalty (same on every rank); gradient: d penalty / d (this rank's owned bits), so that
    summing the shared-table gradients over ranks gives the single-process gradient. 0 for Degree-Quant.
    """
    cfg = quant_config_of(model)
    if cfg.is_dq or cfg.penalty_weight == 0:
        return torch.zeros(())
    rounded = getattr(cfg, "penalty_bits", "continuous") == "rounded"  # as quant.qat.api.quant_penalty
    m_local, e_local = torch.zeros(()), 0
    for _, q in sharded_quantizers(model):
        if q.learn_bits and q._last_row_elems:
            m, e = q.owned_memory_bits(rounded)
            m_local, e_local = m_local + m, e_local + e
    tot = torch.tensor([float(m_local.detach()), float(e_local)], dtype=torch.float64)
    dist.all_reduce(tot)
    excess = max(0.0, (tot[0].item() - cfg.target_bits * tot[1].item()) / KB_BITS)
    value = cfg.penalty_weight * excess ** 2
    coef = 2.0 * cfg.penalty_weight * excess / KB_BITS
    surrogate = coef * m_local
    return surrogate - surrogate.detach() + value


def to_global(owned_rows: Tensor, shard: ShardInfo) -> Tensor:
    """Every rank's owned rows assembled in global order on every rank. Shapes: (N_o, ...) -> (N, ...)."""
    full = owned_rows.new_zeros((shard.num_nodes, *owned_rows.shape[1:]))
    full[shard.part.owned] = owned_rows.detach()
    dist.all_reduce(full)
    return full


def global_state_dict(model: nn.Module, shard: ShardInfo) -> dict[str, Tensor]:
    """The single-process state dict of a sharded quantized `GNN` (collective: every rank must call it)."""
    out = {}
    for k, v in model.state_dict().items():
        key = k.replace(".conv.", ".", 1) if k.startswith("convs.") else k
        is_sharded = any(k == f"{n}.{p}" for n, q in sharded_quantizers(model) if q.scheme == "node"
                         for p in ("step", "bits"))
        out[key] = to_global(v, shard) if is_sharded else v.detach().clone()
    return out


def gather_quantized_model(model: nn.Module, shard: ShardInfo, data, rank: int = 0):
    """Rebuild the single-process quantized `GNN` (``quantize_`` on ``data``, then the gathered state) on ``rank``;
    other ranks get None. Collective: every rank must call it."""
    from gnn.models import GNN
    from quant.qat.api import quantize_

    state = global_state_dict(model, shard)
    if dist.get_rank() != rank:
        return None
    fresh = GNN(model.cfg)
    quantize_(fresh, quant_config_of(model), data)
    fresh.load_state_dict(state)
    fresh.eval()
    return fresh
