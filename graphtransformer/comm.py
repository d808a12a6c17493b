"""Communication primitives of sequence-parallel graph attention, each differentiable with its exact adjoint.

* :func:`seq_to_head` / :func:`head_to_seq`: the DeepSpeed-Ulysses all-to-all pair (each is the other's backward),
  PyTorch's autograd-aware ``all_to_all_single`` between a reshape and a permute.
* :func:`ring_attention`: K/V rotate around a ring (``batch_isend_irecv``); per-block (out, lse) merged with the LSE
  merge; the backward recomputes each block from the saved *global* lse and sends dK/dV around with K/V so that
  they arrive back at their owner (the ring-flash-attn scheme, with any differentiable block kernel).
* :func:`halo_exchange`: a sparse all-to-all (``all_to_all_single`` with split sizes) of only the K/V rows that
  remote ranks need (nodes with edges across ranks); its backward returns the row gradients and adds them up.
  Rows and gradients can travel through distributed/'s codecs (fp16 down to one bit), as the GNN halo does.

Every call records the bytes this rank sends to *other* ranks in a :class:`CommCounter` (self-chunks are local
copies and are not counted). gloo cannot send to self, so size-1 groups short-circuit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed._functional_collectives import all_to_all_single_autograd

from distributed import codecs
from graphtransformer.attention import merge_attention

# (q rows [row_start, row_start + m), k, v) -> (out, lse) of those rows; q (H, m, D), k and v (H, n_k, D).
BlockKernel = Callable[[Tensor, Tensor, Tensor, int], tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class CommRecord:
    layer: str
    op: str  # "a2a", "ring", "halo"
    phase: str  # "forward" or "backward"
    num_bytes: int


@dataclass
class CommCounter:
    """Append-only log of sent bytes; ``total(layer=..., op=..., phase=...)`` filters (None = any)."""

    records: list[CommRecord] = field(default_factory=list)

    def add(self, layer: str, op: str, phase: str, num_bytes: int) -> None:
        self.records.append(CommRecord(layer, op, phase, int(num_bytes)))

    def total(self, layer: str | None = None, op: str | None = None, phase: str | None = None) -> int:
        return sum(r.num_bytes for r in self.records
                   if (layer is None or r.layer == layer) and (op is None or r.op == op)
                   and (phase is None or r.phase == phase))


@dataclass(frozen=True)
class CommContext:
    """One group plus where to log: ``rank`` is this process's index inside ``group``."""

    group: object
    size: int
    rank: int
    counter: CommCounter | None
    layer: str

    def log(self, op: str, phase: str, num_bytes: int) -> None:
        if self.counter is not None:
            self.counter.add(self.layer, op, phase, num_bytes)


def _a2a_chunks(x: Tensor, ctx: CommContext) -> Tensor:
    """all_to_all_single over dim 0 split into ``ctx.size`` equal chunks: chunk p goes to rank p. Differentiable:
    PyTorch's functional collective, whose backward sends the gradient chunks back the same way (equal splits).
    Its bytes are logged in forward, and again when the gradient has gone back (a hook on ``x``'s gradient)."""
    x = x.contiguous()
    num_bytes = x.numel() * x.element_size() * (ctx.size - 1) // ctx.size
    ctx.log("a2a", "forward", num_bytes)
    if x.requires_grad:
        x.register_hook(lambda grad: ctx.log("a2a", "backward", num_bytes))
    return all_to_all_single_autograd(x, None, None, ctx.group)  # waited on by the caller's first use


def seq_to_head(x: Tensor, ctx: CommContext) -> Tensor:
    """Ulysses all-to-all #1. (H, n, D) all heads of my n rows -> (H/P, P*n, D) my head group for the P ranks' rows
    (rank order); identity for P = 1. Needs H % P == 0. Its backward is :func:`head_to_seq` of the gradient."""
    if ctx.size == 1:
        return x
    h, n, d = x.shape
    p = ctx.size
    y = _a2a_chunks(x.reshape(p, h // p, n, d), ctx)  # (P, H/P, n, D), chunk q = rows of rank q
    return y.permute(1, 0, 2, 3).reshape(h // p, p * n, d)


def head_to_seq(y: Tensor, ctx: CommContext) -> Tensor:
    """Ulysses all-to-all #2, the inverse of :func:`seq_to_head`: (H/P, P*n, D) -> (H, n, D); identity for P = 1."""
    if ctx.size == 1:
        return y
    hp, pn, d = y.shape
    p = ctx.size
    x = y.reshape(hp, p, pn // p, d).permute(1, 0, 2, 3)  # (P, H/P, n, D), chunk q = rows of rank q
    return _a2a_chunks(x, ctx).reshape(hp * p, pn // p, d)


@dataclass(frozen=True)
class RingPlan:
    """Peers and block order of (Double-)Ring attention over a ring group of size P cut into windows of ``w``
    consecutive ranks (LoongTrain's Double-Ring; ``w = P`` is the plain ring, ``w = 1`` an outer ring only).

    Rank ``r = win * w + pos`` visits the P key blocks as W = P / w outer steps of w inner steps: at outer step j
    it starts with the block of window ``win - j`` at its own position, and the inner ring rotates that window's
    blocks among the w ranks of its own window. Between outer steps, the block it started with moves on to the
    same position of the next window (asynchronously, while the inner ring computes: intra-window links are the
    fast ones, NVLink, and the outer hop hides behind them).
    """

    size: int
    window: int
    rank: int

    def __post_init__(self):
        if self.window < 1 or self.size % self.window:
            raise ValueError(f"RingPlan: window {self.window} must divide the ring size {self.size}; use one of "
                             f"{[d for d in range(1, self.size + 1) if self.size % d == 0]}")

    @property
    def num_windows(self) -> int:
        return self.size // self.window

    def _at(self, win: int, pos: int) -> int:
        return (win % self.num_windows) * self.window + pos % self.window

    def owner(self, outer: int, inner: int) -> int:
        """Ring rank whose K/V block I hold at (outer step, inner step)."""
        win, pos = divmod(self.rank, self.window)
        return self._at(win - outer, pos - inner)

    def inner_peers(self) -> tuple[int, int]:
        """(send to, receive from) inside my window."""
        win, pos = divmod(self.rank, self.window)
        return self._at(win, pos + 1), self._at(win, pos - 1)

    def outer_peers(self) -> tuple[int, int]:
        """(send to, receive from): same position, next / previous window."""
        win, pos = divmod(self.rank, self.window)
        return self._at(win + 1, pos), self._at(win - 1, pos)


class _Shift:
    """One posted send-to / receive-from pair of a ring (``wait`` returns the received tensor)."""

    def __init__(self, t: Tensor, peers: tuple[int, int], ctx: CommContext, phase: str, tag: int) -> None:
        nxt, prv = (dist.get_global_rank(ctx.group, p) for p in peers)
        t = t.contiguous()
        self.buf = torch.empty_like(t)
        self.reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, nxt, ctx.group, tag),
                                            dist.P2POp(dist.irecv, self.buf, prv, ctx.group, tag)])
        ctx.log("ring", phase, t.numel() * t.element_size())

    def wait(self) -> Tensor:
        for r in self.reqs:
            r.wait()
        return self.buf


INNER_TAG, OUTER_TAG, OUTER_GRAD_TAG = 0, 1, 2  # the outer K/V prefetch and the outer dK/dV hop overlap


def _chunks(num_rows: int, chunk_rows: int) -> list[tuple[int, int]]:
    return [(a, min(a + chunk_rows, num_rows)) for a in range(0, num_rows, chunk_rows)] or [(0, 0)]


def _block(kernel: BlockKernel, q: Tensor, k: Tensor, v: Tensor, chunk_rows: int) -> tuple[Tensor, Tensor]:
    """Run a block kernel over query-row chunks (bounded score memory; rows are independent)."""
    parts = [kernel(q[:, a:b], k, v, a) for a, b in _chunks(q.shape[1], chunk_rows)]
    return torch.cat([o for o, _ in parts], dim=1), torch.cat([s for _, s in parts], dim=1)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(fctx, q, k, v, kernel_for, ctx, chunk_rows, window):
        plan = RingPlan(ctx.size, window, ctx.rank)
        kv_outer = torch.stack([k, v])  # (2, H, n_k, D): the block I start each outer step with
        out = lse = None
        for j in range(plan.num_windows):
            prefetch = (_Shift(kv_outer, plan.outer_peers(), ctx, "forward", OUTER_TAG)
                        if j < plan.num_windows - 1 else None)
            kv = kv_outer
            for i in range(plan.window):
                o_b, l_b = _block(kernel_for(plan.owner(j, i)), q, kv[0], kv[1], chunk_rows)
                out, lse = (o_b, l_b) if out is None else merge_attention(out, lse, o_b, l_b)
                if i < plan.window - 1:
                    kv = _Shift(kv, plan.inner_peers(), ctx, "forward", INNER_TAG).wait()
            if prefetch is not None:
                kv_outer = prefetch.wait()
        fctx.save_for_backward(q, k, v, out, lse)
        fctx.kernel_for, fctx.comm, fctx.chunk_rows, fctx.window = kernel_for, ctx, chunk_rows, window
        return out

    @staticmethod
    def backward(fctx, dout):
        q, k, v, out, lse = fctx.saved_tensors
        ctx = fctx.comm
        plan = RingPlan(ctx.size, fctx.window, ctx.rank)
        lse_safe = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
        dq = torch.zeros_like(q)
        kv_outer, dkv_outer = torch.stack([k, v]), torch.zeros((2, *k.shape), dtype=k.dtype, device=k.device)
        for j in range(plan.num_windows):
            last_outer = j == plan.num_windows - 1
            prefetch = None if last_outer else _Shift(kv_outer, plan.outer_peers(), ctx, "backward", OUTER_TAG)
            kv, dkv = kv_outer, dkv_outer  # dK/dV of this block so far travel with it
            for i in range(plan.window):
                kernel = fctx.kernel_for(plan.owner(j, i))
                for a, b in _chunks(q.shape[1], fctx.chunk_rows):
                    with torch.enable_grad():
                        qd, kd, vd = (t.detach().requires_grad_() for t in (q[:, a:b], kv[0], kv[1]))
                        o_b, l_b = kernel(qd, kd, vd, a)
                        # out = sum_b w_b o_b, w_b = exp(l_b - lse):
                        # dL/do_b = w_b dout, dL/dl_b = w_b <dout, o_b - out>.
                        w = torch.exp(l_b.detach() - lse_safe[:, a:b])  # (H, m), 0 on empty rows
                        g_out = w.unsqueeze(-1) * dout[:, a:b]
                        g_lse = w * (dout[:, a:b] * (o_b.detach() - out[:, a:b])).sum(-1)
                        grads = torch.autograd.grad((o_b, l_b), (qd, kd, vd), (g_out, g_lse), allow_unused=True)
                    for acc, g in ((dq[:, a:b], grads[0]), (dkv[0], grads[1]), (dkv[1], grads[2])):
                        if g is not None:
                            acc += g
                if i < plan.window - 1:
                    both = _Shift(torch.cat([kv, dkv]), plan.inner_peers(), ctx, "backward", INNER_TAG).wait()
                    kv, dkv = both[:2], both[2:]
            if plan.window > 1:  # one more inner hop: the window's dK/dV back to where the blocks started
                dkv = _Shift(dkv, plan.inner_peers(), ctx, "backward", INNER_TAG).wait()
            if plan.num_windows > 1:  # the block's dK/dV follow it to the next window (home after the last hop)
                dkv_outer = _Shift(dkv, plan.outer_peers(), ctx, "backward", OUTER_GRAD_TAG).wait()
            else:
                dkv_outer = dkv
            if prefetch is not None:
                kv_outer = prefetch.wait()
        return dq, dkv_outer[0], dkv_outer[1], None, None, None, None


def ring_attention(q: Tensor, k: Tensor, v: Tensor, kernel_for: Callable[[int], BlockKernel],
                   ctx: CommContext, chunk_rows: int = 2048, window: int = 0) -> Tensor:
    """Attention of my queries over the keys of every ring rank. ``kernel_for(owner)`` returns the block kernel
    for the keys owned by ring rank ``owner`` (it knows that block's mask / edges). Blocks run in query chunks
    of ``chunk_rows`` rows, forward and backward (recompute), so the score memory is chunk_rows x n_k per head.
    ``window``: Double-Ring window (:class:`RingPlan`); 0 = the whole ring (plain ring attention).

    Shapes: q (H, n_q, D), k and v (H, n_k, D) (same n_k on every rank) -> out (H, n_q, D).
    """
    return _RingAttention.apply(q, k, v, kernel_for, ctx, chunk_rows, window or ctx.size)


@dataclass(frozen=True)
class HaloPlan:
    """Which of my rows each rank needs (send side) and how many rows I get from each rank (receive side)."""

    send_rows: Tensor  # (S,) local row ids, grouped by destination rank in rank order
    send_counts: tuple[int, ...]  # (P,)
    recv_counts: tuple[int, ...]  # (P,)


def _exchange_rows(send: Tensor, send_counts: tuple[int, ...], recv_counts: tuple[int, ...], codec: str,
                   generator: torch.Generator | None, group) -> tuple[Tensor, int]:
    """Sparse all-to-all of rows: ``send`` (S, ..., F) grouped by destination rank (``send_counts``) -> the rows
    from every source rank (R, ..., F) (``recv_counts``), and the bytes this rank sent.

    ``fp32`` moves the tensor itself (any dtype, bit-exact). Any other codec of :mod:`distributed.codecs` encodes
    each destination's rows as (rows * ..., F) codec rows (own min/step per K or V row of all heads), sends the
    uint8 payloads (sizes known on both sides from the counts) and decodes into ``send``'s dtype.
    """
    if codec == "fp32":
        recv = send.new_empty((sum(recv_counts), *send.shape[1:]))
        dist.all_to_all_single(recv, send, list(recv_counts), list(send_counts), group=group)
        return recv, send.numel() * send.element_size()
    f = send.shape[-1]
    per_row = math.prod(send.shape[1:-1])  # codec rows per node row (K and V: 2)
    payloads = [codecs.encode(chunk.reshape(-1, f), codec, generator) for chunk in send.split(list(send_counts))]
    recv_sizes = [codecs.num_bytes(codec, r * per_row, f) for r in recv_counts]
    recv = torch.empty(sum(recv_sizes), dtype=torch.uint8, device=send.device)
    dist.all_to_all_single(recv, torch.cat(payloads), recv_sizes, [p.numel() for p in payloads], group=group)
    rows = [codecs.decode(chunk, codec, r * per_row, f)
            for chunk, r in zip(recv.split(recv_sizes), recv_counts, strict=True)]
    out = torch.cat(rows).to(send.dtype).view(sum(recv_counts), *send.shape[1:])
    return out, sum(p.numel() for p in payloads)


class _Halo(torch.autograd.Function):
    @staticmethod
    def forward(fctx, x, plan, ctx, codec, grad_codec, generator):
        fctx.plan, fctx.comm, fctx.num_rows = plan, ctx, x.shape[0]
        fctx.grad_codec, fctx.generator = grad_codec, generator
        send = x[plan.send_rows].contiguous()  # (S, ..., F); plans never send to their own rank
        recv, sent = _exchange_rows(send, plan.send_counts, plan.recv_counts, codec, generator, ctx.group)
        ctx.log("halo", "forward", sent)
        return recv

    @staticmethod
    def backward(fctx, grad):
        plan, ctx = fctx.plan, fctx.comm
        back, sent = _exchange_rows(grad.contiguous(), plan.recv_counts, plan.send_counts, fctx.grad_codec,
                                    fctx.generator, ctx.group)
        ctx.log("halo", "backward", sent)
        dx = grad.new_zeros((fctx.num_rows, *grad.shape[1:])).index_add(0, plan.send_rows, back)
        return dx, None, None, None, None, None


def halo_exchange(x: Tensor, plan: HaloPlan, ctx: CommContext, codec: str = "fp32", grad_codec: str = "fp32",
                  generator: torch.Generator | None = None) -> Tensor:
    """Rows of ``x`` (n, ..., F) that other ranks need -> the rows I need from them (R, ..., F), in rank order.

    ``codec`` compresses the forward rows and ``grad_codec`` their gradients on the way back
    (:data:`distributed.codecs.CODECS`, e.g. ``int1``; ``fp32`` = exact); ``generator`` drives the integer codecs'
    stochastic rounding. The codecs' per-row metadata covers the last dimension F.
    """
    for c in (codec, grad_codec):
        codecs.check_codec(c)
    if ctx.size == 1:
        return x[plan.send_rows]
    return _Halo.apply(x, plan, ctx, codec, grad_codec, generator)
