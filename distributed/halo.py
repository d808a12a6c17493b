"""Halo exchange: the only code that moves node features between ranks.

Per exchanged layer and direction, ONE `all_to_all_single` over a flat uint8 buffer: peer p's chunk is
``codecs.encode(rows for p)`` = packed codes + per-row fp16 metadata, whose size both sides compute from
(rows, F, codec), so no header or second message is needed (Sylvie sends three messages per peer).

Forward sends each peer the owned boundary rows it needs and returns the (N_h, F) halo block; backward
(`HaloFunction`) sends the halo-row gradients back to their owners, who ``index_add_`` them into the
gradient of their owned rows.

Modes (`ExchangeConfig`):
  * synchronous: fresh halos every step (exact with fp32: equals single-process training);
  * pipelined (PipeGCN / Sylvie): a training step uses the halo rows and the halo gradients sent during the
    previous step while this step's transfer runs in the background (``async_op``); every ``sync_every``-th
    epoch is synchronous (bounded staleness), or, with ``staleness_budget``, the epochs that Sylvie's Bounded
    Staleness Adaptor (`distributed.staleness`) picks from the measured drift of the boundary rows. Halo gradients
    pending when a synchronous epoch starts are dropped (their step is over);
  * delta (EF21-style, forward only): sender and receiver hold the same reference copy of every boundary row;
    the sender transmits C(x - ref) and both add the decoded delta to the reference; every ``refresh_every``-th
    epoch sends fp32 rows to reset the references. Evaluation steps use the references without updating them.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

from distributed import codecs
from distributed.partition import Partition
from distributed.staleness import row_drift

HALO_DROPOUT = ("owner", "receiver")


@dataclass(frozen=True, kw_only=True)
class ExchangeConfig:
    """How halo rows travel.

    Attributes:
        codec: codec of forward halo rows (see `codecs.CODECS`).
        grad_codec: codec of backward halo gradients; "" means the same as ``codec``.
        pipeline: use one-step-stale halos and overlap the transfer with compute.
        sync_every: with ``pipeline``, every K-th epoch ((epoch + 1) % K == 0) is synchronous; 0 = never. With
            ``staleness_budget`` it is the bound: a synchronous epoch at least every K epochs.
        staleness_budget: with ``pipeline``, adaptive synchronisation (`distributed.staleness`): a synchronous
            epoch whenever the stale epochs since the last one would exceed this total relative drift; 0 = off.
        delta: forward delta coding against a shared reference (EF21-style).
        refresh_every: with ``delta``, send exact fp32 rows every this many epochs.
        halo_dropout: who draws the dropout mask of a halo row in layers >= 1 (layer 0's input rows are always
            dropped by the receiver). ``"owner"``: rows travel after the owner's dropout, one mask per node as in
            single-process training. ``"receiver"``: rows travel before dropout and each receiver draws its own
            mask (PipeGCN / Sylvie's order); a stale halo gradient then returns through the mask its own forward
            used, where with ``"owner"`` it meets the owner's next mask.
        smoothing: with ``pipeline``, PipeGCN's smoothing: stale epochs use an exponential moving average of the
            stale halo rows and of the stale halo gradients, ``avg = m * avg + (1 - m) * received`` with this
            momentum ``m`` (PipeGCN uses 0.95); a synchronous epoch resets both averages to its exact rows. 0 = off.
        stale_gradients: with ``pipeline``, halo gradients are one step stale too (PipeGCN / Sylvie); False sends
            them synchronously in every step, so only the forward transfer overlaps compute.
    """

    codec: str = "fp32"
    grad_codec: str = ""
    pipeline: bool = False
    sync_every: int = 0
    staleness_budget: float = 0.0
    delta: bool = False
    refresh_every: int = 20
    halo_dropout: str = "owner"
    smoothing: float = 0.0
    stale_gradients: bool = True

    def __post_init__(self) -> None:
        codecs.check_codec(self.codec)
        if self.halo_dropout not in HALO_DROPOUT:
            raise ValueError(f"ExchangeConfig: halo_dropout={self.halo_dropout!r}; valid: {', '.join(HALO_DROPOUT)}")
        if self.grad_codec:
            codecs.check_codec(self.grad_codec)
        if self.sync_every < 0:
            raise ValueError(f"ExchangeConfig: sync_every={self.sync_every}; use 0 (never) or K >= 1")
        if self.refresh_every < 1:
            raise ValueError(f"ExchangeConfig: refresh_every={self.refresh_every}; need >= 1")
        if self.sync_every and not self.pipeline:
            raise ValueError("ExchangeConfig: sync_every only acts with pipeline=True; set pipeline or drop it")
        if not (math.isfinite(self.staleness_budget) and self.staleness_budget >= 0):
            raise ValueError(f"ExchangeConfig: staleness_budget={self.staleness_budget}; use 0 (off) or a drift > 0")
        if not 0 <= self.smoothing < 1:  # also refuses nan
            raise ValueError(f"ExchangeConfig: smoothing={self.smoothing}; use 0 (off) or a momentum in (0, 1)")
        if not self.stale_gradients and not self.pipeline:
            raise ValueError("ExchangeConfig: stale_gradients=False (fresh gradients) only acts with pipeline=True")
        if self.smoothing and not self.pipeline:
            raise ValueError("ExchangeConfig: smoothing averages stale halos; it needs pipeline=True")
        if self.staleness_budget and not (self.pipeline and self.sync_every):
            raise ValueError("ExchangeConfig: staleness_budget (adaptive synchronisation) needs pipeline=True and "
                             "sync_every=K as its bound (a synchronous epoch at least every K epochs)")

    @property
    def adaptive(self) -> bool:
        """Whether Sylvie's Bounded Staleness Adaptor picks the synchronous epochs."""
        return self.staleness_budget > 0

    @property
    def backward_codec(self) -> str:
        return self.grad_codec or self.codec


class ByteCounter:
    """Bytes this rank hands to the transport, keyed (epoch, layer, direction); direction in
    {"setup", "forward", "backward", "eval"}. Also seconds blocked in the transport per epoch."""

    def __init__(self) -> None:
        self.bytes: dict[tuple[int, int, str], int] = defaultdict(int)
        self.seconds: dict[int, float] = defaultdict(float)

    def add(self, epoch: int, layer: int, direction: str, num_bytes: int) -> None:
        self.bytes[(epoch, layer, direction)] += num_bytes

    def epoch_bytes(self, epoch: int, directions: tuple[str, ...] = ("forward", "backward")) -> int:
        return sum(b for (e, _, d), b in self.bytes.items() if e == epoch and d in directions)

    def by_layer(self, epoch: int) -> dict[str, int]:
        return {f"layer{l}/{d}": b for (e, l, d), b in sorted(self.bytes.items()) if e == epoch}


class Transfer:
    """One posted all_to_all_single: the receive buffer, its per-peer chunk sizes and the work handle."""

    def __init__(self, send: list[Tensor], recv_rows: list[int], codec: str, generator: torch.Generator | None,
                 group, async_op: bool) -> None:
        num_features = max((s.size(1) for s in send), default=0)
        self.codec, self.recv_rows, self.num_features = codec, recv_rows, num_features
        payloads = [codecs.encode(s, codec, generator) for s in send]
        self.sent = payloads  # kept: the delta sender decodes its own payloads
        in_splits = [p.numel() for p in payloads]
        self.out_splits = [codecs.num_bytes(codec, r, num_features) for r in recv_rows]
        device = send[0].device
        self.buffer = torch.empty(sum(self.out_splits), dtype=torch.uint8, device=device)
        self.num_bytes = sum(in_splits)
        self.work = dist.all_to_all_single(self.buffer, torch.cat(payloads), self.out_splits, in_splits,
                                           group=group, async_op=async_op)

    def result(self) -> Tensor:
        """Wait and decode. Shapes: -> (sum(recv_rows), F) float32."""
        if self.work is not None:
            self.work.wait()
            self.work = None
        chunks = torch.split(self.buffer, self.out_splits)
        rows = [codecs.decode(c, self.codec, r, self.num_features) for c, r in zip(chunks, self.recv_rows,
                                                                                strict=True)]
        return torch.cat(rows) if rows else self.buffer.new_zeros((0, self.num_features), dtype=torch.float32)


class HaloExchanger:
    """Per-layer exchange state (pipeline handles, delta references) for one rank. Not an nn.Module: it holds
    no parameters, only buffers that live for one run."""

    def __init__(self, partition: Partition, cfg: ExchangeConfig, layer: int, counter: ByteCounter,
                 generator: torch.Generator | None = None, group=None) -> None:
        self.part, self.cfg, self.layer, self.counter = partition, cfg, layer, counter
        self.generator, self.group = generator, group
        self.epoch = 0
        self.pending_fwd: Transfer | None = None
        self.pending_bwd: Transfer | None = None
        self.ref_send: Tensor | None = None  # (sum S_p, F) delta reference of rows sent
        self.ref_recv: Tensor | None = None  # (N_h, F) delta reference of halo rows
        self.last_halo: Tensor | None = None  # (N_h, F) the halo of the last training step
        # adaptive synchronisation (cfg.adaptive): DistGNN.set_epoch decides; the rows sent by the last training step
        # (exact, before the codec) and the drift sums of this epoch's step (`staleness.row_drift`)
        self.synchronous_now = False
        self.prev_sent: Tensor | None = None  # (sum S_p, F)
        self.drift = (0.0, 0.0)
        # smoothing (cfg.smoothing): moving averages of the halo rows (N_h, F) and of the halo gradients of the owned
        # rows sent (sum S_p, F) that stale steps use
        self.smooth_fwd: Tensor | None = None
        self.smooth_bwd: Tensor | None = None

    # --- epoch control -------------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    @property
    def stale(self) -> bool:
        """Whether this epoch's training steps use one-step-stale halos."""
        if self.cfg.adaptive:
            return not self.synchronous_now
        k = self.cfg.sync_every
        return self.cfg.pipeline and not (k and (self.epoch + 1) % k == 0)

    def take_drift(self) -> tuple[float, float]:
        """The drift sums of the last training step (`staleness.row_drift`), reset to zero."""
        drift, self.drift = self.drift, (0.0, 0.0)
        return drift

    def _smoothed(self, average: Tensor | None, received: Tensor) -> Tensor:
        """The moving average ``average`` updated with the stale ``received`` rows (``received`` if none yet)."""
        m = self.cfg.smoothing
        return received if average is None else m * average + (1 - m) * received

    def _timed_result(self, t: Transfer) -> Tensor:
        start = time.perf_counter()
        out = t.result()
        self.counter.seconds[self.epoch] += time.perf_counter() - start
        return out

    # --- forward ---------------------------------------------------------------------------------------
    def _post_forward(self, x_own: Tensor, direction: str, update: bool) -> tuple[Transfer, bool]:
        send_rows = [x_own.detach()[idx] for idx in self.part.send_index]  # per peer (S_p, F)
        if self.cfg.adaptive and update and send_rows:
            sent = torch.cat(send_rows)
            if self.prev_sent is not None:
                self.drift = row_drift(self.prev_sent, sent)
            self.prev_sent = sent
        refresh = self.epoch % self.cfg.refresh_every == 0 or self.ref_send is None
        codec = codecs.lossless_codec(x_own.dtype) if refresh or not self.cfg.delta else self.cfg.codec
        if self.cfg.delta and not refresh:
            ref = torch.split(self.ref_send, self.part.send_counts)
            send_rows = [s - r for s, r in zip(send_rows, ref, strict=True)]
        t = Transfer(send_rows, self.part.recv_counts, codec if self.cfg.delta else self.cfg.codec,
                     self.generator, self.group, async_op=direction == "forward" and self.stale)
        self.counter.add(self.epoch, self.layer, direction, t.num_bytes)
        if self.cfg.delta and update:
            sent = torch.cat([codecs.decode(p, t.codec, s.size(0), s.size(1))
                              for p, s in zip(t.sent, send_rows, strict=True)])
            self.ref_send = sent if refresh else self.ref_send + sent
        return t, refresh

    def _finish_forward(self, t: Transfer, refresh: bool, update: bool) -> Tensor:
        rows = self._timed_result(t)  # (N_h, F)
        halo = rows if not self.cfg.delta or refresh else self.ref_recv + rows
        if update:
            self.ref_recv = self.last_halo = halo
        return halo

    def forward(self, x_own: Tensor, training: bool) -> Tensor:
        """Halo rows for this layer. Shapes: x_own (N_o, F) -> (N_h, F)."""
        if not training:  # pipelined transfers of the last training step stay in flight: the next step uses them
            return self._finish_forward(*self._post_forward(x_own, "eval", update=False), update=False)
        if not self.stale:
            self.drain()
            halo = self._finish_forward(*self._post_forward(x_own, "forward", update=True), update=True)
            if self.cfg.smoothing:  # synchronous: exact rows, and the average restarts from them
                self.smooth_fwd = halo
            return halo
        previous = self.pending_fwd
        if previous is None and self.last_halo is not None:  # after a synchronous epoch: its halo is 1 step old
            halo = self.last_halo
        elif previous is None:  # very first step: nothing stale yet, exchange synchronously once
            halo = self._finish_forward(*self._post_forward(x_own, "forward", update=True), update=True)
        else:
            halo = self._finish_forward(*previous, update=True)
        self.pending_fwd = self._post_forward(x_own, "forward", update=True)
        if self.cfg.smoothing:
            halo = self.smooth_fwd = self._smoothed(self.smooth_fwd, halo)
        return halo

    def drain(self) -> None:
        """Complete the pipelined transfers still in flight: before a synchronous epoch, and when training ends
        (`DistGNN.drain`), so that no rank tears its process group down under an unfinished transfer."""
        if self.pending_fwd is not None:
            self._finish_forward(*self.pending_fwd, update=True)  # keeps the delta references in step
            self.pending_fwd = None
        if self.pending_bwd is not None:
            self._timed_result(self.pending_bwd)  # stale gradients of a finished step: dropped
            self.pending_bwd = None

    # --- backward --------------------------------------------------------------------------------------
    def backward(self, grad_halo: Tensor, num_owned: int) -> Tensor:
        """Gradient of the owned rows from the halo-row gradients. Shapes: (N_h, F) -> (N_o, F)."""
        grad_halo = grad_halo.contiguous()
        send = list(torch.split(grad_halo, self.part.recv_counts))  # rows owned by each peer
        codec = self.cfg.backward_codec
        stale = self.stale and self.cfg.stale_gradients
        t = Transfer(send, self.part.send_counts, codec, self.generator, self.group, async_op=stale)
        self.counter.add(self.epoch, self.layer, "backward", t.num_bytes)
        if stale:
            previous, self.pending_bwd = self.pending_bwd, t
            grad_rows = self._timed_result(previous) if previous is not None else None
        else:
            grad_rows = self._timed_result(t)
        if self.cfg.smoothing:
            if grad_rows is None:  # the first stale step after a synchronous one: the average is all there is
                grad_rows = self.smooth_bwd
            elif stale:
                grad_rows = self.smooth_bwd = self._smoothed(self.smooth_bwd, grad_rows)
            else:  # synchronous: exact rows, and the average restarts from them
                self.smooth_bwd = grad_rows
        grad = grad_halo.new_zeros((num_owned, grad_halo.size(1)))
        if grad_rows is not None and grad_rows.numel():
            grad.index_add_(0, torch.cat(self.part.send_index), grad_rows.to(grad.dtype))
        return grad


class HaloFunction(torch.autograd.Function):
    """halo = exchange(x_own); backward returns the owners' share of d(halo). Shapes: (N_o, F) -> (N_h, F)."""

    @staticmethod
    def forward(ctx, x_own: Tensor, exchanger: HaloExchanger, training: bool) -> Tensor:
        ctx.exchanger, ctx.num_owned = exchanger, x_own.size(0)
        return exchanger.forward(x_own, training).to(x_own.dtype)

    @staticmethod
    def backward(ctx, grad_halo: Tensor):
        return ctx.exchanger.backward(grad_halo, ctx.num_owned), None, None


def halo_exchange(x_own: Tensor, exchanger: HaloExchanger, training: bool) -> Tensor:
    """Differentiable halo fetch. Shapes: x_own (N_o, F) -> (N_h, F)."""
    return HaloFunction.apply(x_own, exchanger, training)
