"""`parallelize_gnn`: turn a built single-device `gnn.models.GNN` into a partition-parallel one.

Order of what is applied (documented here only):
  1. every conv is wrapped in `HaloConv`: before message passing it fetches the halo rows of its input
     (`distributed.halo`), runs the unchanged conv on the local+halo subgraph and keeps the owned rows;
  2. GCN convs get the normalisation of the GLOBAL graph (global degrees of owned and halo nodes), so that
     results equal single-process training;
  3. parameters are broadcast from rank 0; PyTorch's `DistributedDataParallel` sums the replicated parameters'
     gradients over ranks during backward (bucketed, overlapped with the rest of backward; a comm hook that sums
     instead of averaging, since every rank's loss is a partial sum of the one global loss);
  4. a model quantized with ``quant.quantize_`` (on the full graph, before this call) gets its quantizers
     sharded by `distributed.quantized.shard_quantizers`: per-node parameters keep only the owned rows and are
     left out of the gradient all-reduce (DDP ignores them, and every buffer).
The layer-0 input is exchanged once, at the first step (Sylvie/PipeGCN's pre-processing), with the narrowest
codec that keeps it exact (``ParallelConfig.input_codec``), and kept in checkpoints so that a resumed run does not
send it again: input features carry no gradient. Dropout of layer 0's halo rows is then drawn by the receiver;
every other layer exchanges owner-dropped rows (``ExchangeConfig.halo_dropout``: or undropped rows that the receiver
drops), so with dropout 0 the result is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from distributed import codecs
from distributed.halo import ByteCounter, ExchangeConfig, HaloExchanger, Transfer, halo_exchange
from distributed.partition import Partition
from distributed.quantized import SHARDED_ATTR, ShardInfo, shard_quantizers
from distributed.staleness import StalenessAdaptor, relative_drift
from gnn.conv import GCNConv
from gnn.models import GNN, dropout
from gnn.trainer import first_layer_takes_sparse
from quant.qat.api import is_quantized


@dataclass(frozen=True, kw_only=True)
class ParallelConfig:
    """Attributes:
        exchange: how halo rows travel (`ExchangeConfig`).
        seed: seed of the stochastic-rounding generator (offset by rank).
        sparse_input: layer 0 takes sparse COO input features (own rows from the caller, halo rows kept sparse
            after the one fp32 exchange): bag-of-words inputs such as Coauthor CS (0.9% non-zero) then cost
            O(nnz) in dropout and the first linear map instead of O(N F). Needs a first layer that projects
            before it aggregates and does not quantize its input (`accepts_sparse_input`). Same math as dense.
        input_codec: codec of the one-time exchange of layer 0's input halo rows. ``"auto"`` (default): the
            narrowest codec that reproduces every rank's rows exactly (`codecs.narrowest_exact_codec`; binary
            bag-of-words rows go as int1, 32x fewer bytes than fp32), so results do not change; a codec name forces
            it (lossy ones perturb the input halo rows once, for the whole run).
    """

    exchange: ExchangeConfig = field(default_factory=ExchangeConfig)
    seed: int = 0
    sparse_input: bool = False
    input_codec: str = "auto"

    def __post_init__(self) -> None:
        if self.input_codec != "auto":
            codecs.check_codec(self.input_codec)


def global_gcn_edges(part: Partition, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """GCN edges of the local subgraph with weights 1/sqrt(deg_i deg_j) from GLOBAL degrees (+1 self loop).

    Self loops are added for owned nodes only (halo outputs are discarded). Shapes: -> ((2, E_r + N_o), (E_r + N_o,)).
    """
    loops = torch.arange(part.num_owned, device=part.edge_index.device).repeat(2, 1)
    ei = torch.cat([part.edge_index, loops], dim=1)
    dinv = (part.degree.to(dtype) + 1).rsqrt()  # (N_o + N_h,)
    return ei, dinv[ei[0]] * dinv[ei[1]]


class GlobalGCNNorm:
    """Stands in for `GCNConv.normalized_edges`: returns the precomputed global-degree normalisation."""

    def __init__(self, part: Partition) -> None:
        self.edges = global_gcn_edges(part)

    def __call__(self, edge_index: Tensor, num_nodes: int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        ei, w = self.edges
        return ei.to(edge_index.device), w.to(device=edge_index.device, dtype=dtype)


class HaloConv(nn.Module):
    """conv(cat(dropout(x_own), dropout(halo)), local edges)[:N_o]. Shapes: x_own (N_o, F_in) -> (N_o, F_out).

    Receives the undropped input (`GNN.convs_apply_dropout`) and drops it itself, so that it can choose which side
    draws a halo row's mask (`ExchangeConfig.halo_dropout`): the owner's rows are always dropped first, then the
    halo rows, by the receiver unless they travelled already dropped.
    """

    def __init__(self, conv: nn.Module, exchanger: HaloExchanger, num_owned: int, dropout_p: float) -> None:
        super().__init__()
        self.conv, self.exchanger, self.num_owned, self.dropout_p = conv, exchanger, num_owned, dropout_p
        self.input_halo: Tensor | None = None  # layer 0 only: fp32 halo of the raw input features

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        p, training = self.dropout_p, self.training
        if self.input_halo is not None:  # layer 0: the input rows, exchanged once, dropped here
            x = dropout(x, p, training)
            halo = dropout(self.input_halo, p, training)  # (N_h, F_in), dense or sparse COO
        elif self.exchanger.cfg.halo_dropout == "receiver":
            halo = halo_exchange(x, self.exchanger, training)  # (N_h, F_in), undropped
            x = dropout(x, p, training)
            halo = dropout(halo, p, training)
        else:
            x = dropout(x, p, training)
            halo = halo_exchange(x, self.exchanger, training)  # (N_h, F_in), dropped by the owner
        if x.is_sparse != halo.is_sparse:
            raise ValueError("HaloConv: own and halo input rows must both be dense or both sparse; pass sparse "
                             "own features exactly when ParallelConfig.sparse_input is set")
        x_full = torch.cat([x, halo])  # (N_o + N_h, F_in), sparse COO stays sparse
        out = self.conv(x_full, edge_index)  # (N_o + N_h, F_out)
        return out[: self.num_owned]


class DistGNN(nn.Module):
    """A `GNN` whose convs exchange halo rows. forward(x_own, edge_index_local) -> (N_o, C) logits of owned nodes."""

    def __init__(self, model: GNN, part: Partition, cfg: ParallelConfig, group=None) -> None:
        super().__init__()
        self.module, self.part, self.cfg, self.group = model, part, cfg, group
        self.counter = ByteCounter()
        # stochastic rounding draws on the device of the exchanged rows (a CUDA generator on NCCL ranks)
        self.generator = torch.Generator(device=part.edge_index.device).manual_seed(cfg.seed * 1000 + part.rank)
        self.exchangers = []
        if cfg.sparse_input and not first_layer_takes_sparse(model):
            raise ValueError(f"ParallelConfig: the first {model.cfg.arch!r} layer would densify sparse input "
                             f"(it aggregates before projecting, or quantizes its input); set sparse_input=False")
        for i, conv in enumerate(model.convs):
            ex = HaloExchanger(part, cfg.exchange, i, self.counter, self.generator, group)
            self.exchangers.append(ex)
            if isinstance(conv, GCNConv):
                conv.normalized_edges = GlobalGCNNorm(part)  # instance attribute shadows the method
            model.convs[i] = HaloConv(conv, ex, part.num_owned, model.cfg.dropout)
        model.convs_apply_dropout = True
        self._input_key: Tensor | None = None
        self.input_codec: str | None = None  # what the setup exchange used (None: not exchanged by this run)
        self.shard: ShardInfo | None = None
        ex_cfg = cfg.exchange
        self.adaptor = StalenessAdaptor(ex_cfg.staleness_budget, ex_cfg.sync_every) if ex_cfg.adaptive else None
        if is_quantized(model):
            self.shard = shard_quantizers(model, part, None, self.counter, cfg.seed)
        # held outside the module tree (no second copy of every state_dict key)
        object.__setattr__(self, "ddp", _gradient_sum_ddp(model, part.edge_index.device))

    def set_epoch(self, epoch: int) -> None:
        """Call at the start of every training epoch, on every rank (with adaptive synchronisation: collective)."""
        for ex in self.exchangers:
            ex.set_epoch(epoch)
        if self.shard is not None:
            self.shard.epoch = epoch
        if self.adaptor is not None:
            self._adapt(epoch)

    def _adapt(self, epoch: int) -> None:
        """Sylvie's Bounded Staleness Adaptor: sum the last step's drift over ranks, decide this epoch's mode."""
        sums = torch.tensor([ex.take_drift() for ex in self.exchangers], dtype=torch.float64,
                            device=self.part.edge_index.device)  # (L, 2)
        dist.all_reduce(sums, group=self.group)
        synchronous = self.adaptor.decide(epoch, relative_drift(sums.cpu()))
        for ex in self.exchangers:
            ex.synchronous_now = synchronous

    @property
    def stale(self) -> bool:
        """Whether this epoch's training step uses one-step-stale halos (pipelined and not a synchronous epoch)."""
        return any(ex.stale for ex in self.exchangers)

    def drain(self) -> None:
        """Wait for every halo transfer still in flight (pipelined mode); call when training ends."""
        for ex in self.exchangers:
            ex.drain()

    def exchange_input(self, x: Tensor) -> None:
        """Fetch the halo rows of the raw input ``x`` (N_o, F_in) once, with ``cfg.input_codec`` (bytes counted as
        "setup"). The first forward on ``x`` calls it; call it first to time the setup on its own. Collective."""
        if x.is_sparse != self.cfg.sparse_input:
            raise ValueError(f"DistGNN: input features are {'sparse' if x.is_sparse else 'dense'} but "
                             f"ParallelConfig.sparse_input is {self.cfg.sparse_input}; pass "
                             f"{'x.to_sparse()' if self.cfg.sparse_input else 'x.to_dense()'}")
        send = [x.detach().index_select(0, idx) for idx in self.part.send_index]
        send = [s.to_dense() if s.is_sparse else s for s in send]
        codec = self.cfg.input_codec
        if codec == "auto":
            codec = agree_on_codec(codecs.exact_codecs(send, x.dtype), self.group)
        # its own generator: the training exchanges' stochastic-rounding stream stays what it was without this one
        gen = torch.Generator(device=x.device).manual_seed(self.cfg.seed * 1000 + self.part.rank + 500_000)
        t = Transfer(send, self.part.recv_counts, codec, gen, self.group, async_op=False)
        self.counter.add(-1, 0, "setup", t.num_bytes)
        self.input_codec = codec
        self.set_input_halo(t.result().to(x.dtype), x)

    def set_input_halo(self, halo: Tensor, x: Tensor) -> None:
        """Install layer 0's input halo rows (N_h, F_in) for the input ``x`` (from the exchange, or from a
        checkpoint: a resumed run does not send them again)."""
        if x.is_sparse and not halo.is_sparse:
            halo = halo.to_sparse().coalesce()
        self.module.convs[0].input_halo = halo
        self._input_key = x

    @property
    def input_halo(self) -> Tensor | None:
        """Layer 0's input halo rows once exchanged (what a checkpoint keeps), else None."""
        return self.module.convs[0].input_halo

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        if x.requires_grad:
            raise ValueError("DistGNN: input features must not require grad (layer-0 halos are exchanged once)")
        if self._input_key is not x:
            if self._input_key is None and self.input_halo is not None:
                self._input_key = x  # restored from a checkpoint (restore_run_state checked the partition)
            else:
                self.exchange_input(x)
        return self.ddp(x, edge_index)  # the module's forward; DDP sums the gradients in backward


def agree_on_codec(exact: list[bool], group=None) -> str:
    """The narrowest codec of `codecs.CODEC_WIDTH_ORDER` exact on every rank (``exact``: this rank's
    `codecs.exact_codecs`; a MIN all-reduce keeps the codecs exact everywhere). Collective."""
    t = torch.tensor(exact, dtype=torch.int64)
    if dist.get_backend(group) == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=group)
    return codecs.CODEC_WIDTH_ORDER[t.tolist().index(1)]


def _sum_allreduce_hook(group, bucket):  # no annotations: DDP checks them as objects, and these would be strings
    """DDP comm hook: the bucket's gradients (a ``dist.GradBucket``) summed over ranks; a future of the summed
    flat tensor (DDP's own hook divides by the world size)."""
    fut = dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def _gradient_sum_ddp(model: GNN, device: torch.device) -> DistributedDataParallel:
    """``model`` under DDP on the default process group: replicated parameters only (the sharded per-node
    quantizer parameters and every buffer are ignored, so DDP never broadcasts a buffer; its broadcast of the
    replicated parameters at construction repeats ``parallelize_gnn``'s), gradients summed."""
    ignored = [name for name, p in model.named_parameters() if getattr(p, SHARDED_ATTR, False)]
    ignored += [name for name, _ in model.named_buffers()]
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, ignored)
    ddp = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    ddp.register_comm_hook(dist.group.WORLD, _sum_allreduce_hook)
    return ddp


def parallelize_gnn(model: GNN, part: Partition, cfg: ParallelConfig, group=None) -> DistGNN:
    """Wrap a built node-level `GNN` for partition-parallel full-graph training (see the module docstring).

    Needs an initialised default process group of ``part.num_parts`` ranks; broadcasts rank 0's parameters.
    """
    if not dist.is_initialized():
        raise RuntimeError("parallelize_gnn: call torch.distributed.init_process_group first")
    if dist.get_world_size() != part.num_parts:
        raise ValueError(f"parallelize_gnn: world size {dist.get_world_size()} != {part.num_parts} partitions; "
                         f"launch {part.num_parts} ranks or repartition")
    if model.cfg.pool != "none":
        raise ValueError("parallelize_gnn: only node-level models (pool='none') are partition-parallel")
    if model.cfg.norm == "batch":
        raise ValueError("parallelize_gnn: norm='batch' would use per-partition statistics; use 'layer' or 'none'")
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    return DistGNN(model, part, cfg, group)
