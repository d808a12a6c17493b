"""`A2QQuantizer`: the module holding A2Q's learnable step sizes and bitwidths for one quantization point.

Schemes (what one (step, bits) pair covers; parameter shapes in brackets):

* ``"node"``: one pair per node of a fixed graph [N, 1] (A2Q node-level; transductive);
* ``"nns"``: a pool of m pairs [m, 1], each node picks one by the Nearest Neighbor Strategy (A2Q graph-level);
* ``"degree"``: a table of D pairs [D, 1] indexed by in-degree bucket (MEGA-style degree-aware);
* ``"channel"``: one step per column [1, C] (XW, and GIN's input before the sum);
* ``"row"``: one step per output channel of a weight [F_out, 1];
* ``"head"``: one step per attention head (GAT attention vectors [1, H, 1], edge scores [1, H]).

Feature schemes (node, nns, degree) learn their bits; the others keep a fixed bitwidth buffer (A2Q never
optimizes weight / XW bits). Steps are initialised on the first forward call so that each row's maximum maps to
the top code (no clipping at start); `quant.qat.api.quantize_` triggers that call for node tasks.
Bits: ``b = clamp(|b_param|, 1, max_bits)``, rounded half away from zero in forward (straight-through).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from gnn.ops import sparse_from_values
from quant.qat.degree_aware import degree_bucket
from quant.qat.graph_context import GraphContext
from quant.qat.nns import nns_range, nns_select
from quant.qat.quantizers import STEP_EPS, a2q_fake_quant, a2q_fake_quant_stored, a2q_qmax, round_half_away

SCHEMES = ("node", "nns", "degree", "channel", "row", "head")
FEATURE_SCHEMES = ("node", "nns", "degree")


def _row_nonzeros(q: Tensor) -> Tensor:
    """(R,) non-zero values of every row of a dense or sparse COO (R, ...) tensor."""
    if q.is_sparse:
        q = q.coalesce()
        return torch.bincount(q.indices()[0][q.values() != 0], minlength=q.size(0))
    return (q.reshape(q.size(0), -1) != 0).sum(dim=1)


class A2QQuantizer(nn.Module):
    """Learned symmetric fake quantizer of one tensor.

    Args:
        role, kind: copied from the `QuantPoint` it replaces.
        scheme: one of ``SCHEMES``.
        param_shape: shape of the step (and bits) parameters, see the module docstring.
        init_bits: initial signed bitwidth (post-ReLU tensors: A2Q's init_bits + 1).
        max_bits: upper clamp of the bits.
        unsigned: the tensor is non-negative (post-ReLU); its reported bits exclude the sign bit.
        local: use the Local Gradient for step and bits.
        ctx: the model's `GraphContext` (in-degrees of the current graph).
        nns_range_kind, nns_by_degree: NNS options; num_buckets, bucket_scheme: degree-table options.
    """

    def __init__(self, *, role: str, kind: str, scheme: str, param_shape: tuple[int, ...], init_bits: int,
                 max_bits: int, unsigned: bool, local: bool, ctx: GraphContext, nns_range_kind: str = "code",
                 nns_by_degree: bool = False, num_buckets: int = 1, bucket_scheme: str = "linear") -> None:
        super().__init__()
        if scheme not in SCHEMES:
            raise ValueError(f"A2QQuantizer: unknown scheme {scheme!r}; valid: {', '.join(SCHEMES)}")
        if not 1 <= init_bits <= max_bits:
            raise ValueError(f"A2QQuantizer: init_bits={init_bits} outside [1, max_bits={max_bits}]; lower "
                             f"init_bits or raise max_bits")
        self.role, self.kind, self.scheme = role, kind, scheme
        self.max_bits, self.unsigned, self.local = max_bits, unsigned, local
        self.nns_range_kind, self.nns_by_degree = nns_range_kind, nns_by_degree
        self.num_buckets, self.bucket_scheme = num_buckets, bucket_scheme
        self.ctx = ctx
        self.learn_bits = scheme in FEATURE_SCHEMES
        self.step = nn.Parameter(torch.full(param_shape, 1e-2))
        bits = torch.full(param_shape, float(init_bits))
        if self.learn_bits:
            self.bits = nn.Parameter(bits)
        else:
            self.register_buffer("bits", bits)
        self.register_buffer("initialized", torch.tensor(False))
        self._last_rows: Tensor | None = None  # (R,) continuous bits of the rows of the last forward
        self._last_row_elems = 0
        self._eval_records: list[tuple[Tensor, Tensor | None]] = []
        self.last_selection: Tensor | None = None  # NNS: pool entry of every row of the last eval forward (R,)
        self.track_nnz = False  # record the non-zero codes per row (the hardware cost, quant.qat.hw_cost, sets it)
        self.last_nnz: Tensor | None = None  # (R,) int64, from the last eval forward (no dropout) once there is one
        self._nnz_from_eval = False

    # ------------------------------------------------------------------------------------------- helpers
    @property
    def takes_sparse_rows(self) -> bool:
        """Whether sparse COO input (N, F) is quantized on its stored values (per-row schemes: node, degree)."""
        return self.scheme in ("node", "degree")

    def effective_bits(self) -> Tensor:
        """Continuous signed bits clamp(|b|, 1, max_bits), same shape as the parameter (differentiable)."""
        return self.bits.abs().clamp(1.0, float(self.max_bits))

    def rounded_bits(self) -> Tensor:
        return round_half_away(self.effective_bits().detach())

    def _effective_step(self) -> Tensor:
        return self.step.abs().clamp_min(STEP_EPS)

    def _rows_index(self, x: Tensor) -> Tensor | None:
        """Parameter row of every tensor row for the shared schemes; None when parameters broadcast directly."""
        if self.scheme == "nns":
            deg = self.ctx.require_in_deg(x.size(0), "A2Q NNS (degree mode)") if self.nns_by_degree else None
            return nns_select(x, self._effective_step().view(-1), self.rounded_bits().view(-1),
                              self.nns_range_kind, deg)
        if self.scheme == "degree":
            deg = self.ctx.require_in_deg(x.size(0), "degree-aware quantizer")
            return degree_bucket(deg, self.num_buckets, self.bucket_scheme)
        if self.scheme == "node" and x.size(0) != self.step.size(0):
            raise RuntimeError(f"A2QQuantizer({self.role}): per-node parameters were built for "
                               f"{self.step.size(0)} nodes but the input has {x.size(0)} rows; per-node A2Q is "
                               f"transductive. For other graphs quantize with data=None (Nearest Neighbor "
                               f"Strategy) or use method='degree-aware'")
        return None

    @torch.no_grad()
    def _calibrate(self, x: Tensor) -> None:
        """Initial steps: the maximum magnitude of each parameter's rows maps to the top code."""
        qmax = a2q_qmax(self.rounded_bits()).clamp_min(1.0)
        a = x.detach().coalesce() if x.is_sparse else x.detach().abs()
        if self.scheme in FEATURE_SCHEMES:
            if a.is_sparse:  # per-row schemes only (`takes_sparse_rows`): the row maxima of the stored values
                row_max = a.values().new_zeros(a.size(0)).scatter_reduce_(0, a.indices()[0], a.values().abs(), "amax")
            else:
                row_max = a.reshape(a.size(0), -1).amax(dim=1)  # (N,)
            pos = row_max[row_max > 0]
            fallback = float(pos.mean()) if pos.numel() else 1.0
            if self.scheme == "node":
                s = torch.where(row_max > 0, row_max, torch.full_like(row_max, fallback)).view(-1, 1)
            elif self.scheme == "degree":
                idx = self._rows_index(x)
                total = row_max.new_zeros(self.num_buckets).index_add_(0, idx, row_max)  # input's dtype
                count = row_max.new_zeros(self.num_buckets).index_add_(0, idx, torch.ones_like(row_max))
                s = torch.where(count > 0, total / count.clamp_min(1), torch.full_like(total, fallback))
                s = s.clamp_min(1e-6).view(-1, 1)
            else:  # nns: log-spaced pool between a low quantile and the maximum of the row maxima
                m = self.step.size(0)
                lo = float(torch.quantile(pos, 0.05)) if pos.numel() else 1.0
                hi = float(pos.max()) if pos.numel() else 1.0
                lo = min(lo, hi) if lo > 0 else hi
                s = torch.logspace(math.log10(lo), math.log10(hi), m, device=x.device).view(-1, 1)
                self.step.copy_(s / qmax)
                if self.nns_range_kind == "code":
                    self.step.mul_(qmax / (qmax + 1.0))
                self.initialized.fill_(True)
                return
        else:
            dims = {"channel": tuple(range(a.dim() - 1)), "row": tuple(range(1, a.dim())),
                    "head": tuple(d for d in range(a.dim()) if self.step.size(d) == 1)}[self.scheme]
            s = a.amax(dim=dims, keepdim=True).reshape(self.step.shape)
            s = torch.where(s > 0, s, torch.ones_like(s))
        self.step.copy_(s / qmax)
        self.initialized.fill_(True)

    # ------------------------------------------------------------------------------------------- forward
    def forward(self, x: Tensor) -> Tensor:
        if x.is_sparse and not self.takes_sparse_rows:
            raise ValueError(f"A2QQuantizer({self.role}): scheme {self.scheme!r} takes dense input only; sparse COO "
                             f"input is quantized by the per-row schemes (node, degree)")
        if not bool(self.initialized):
            self._calibrate(x)
        idx = self._rows_index(x)
        s, b = self._effective_step(), self.effective_bits()
        if self.scheme == "nns" and not self.training:  # what the integer export takes as per-node steps
            self.last_selection = idx.detach()
        if idx is not None:  # gather: autograd scatter-adds each row's gradient onto its shared entry
            s, b = s[idx], b[idx]
        if x.is_sparse:  # (N, F) COO: round the stored values; zeros stay zero
            x = x.coalesce()
            q = a2q_fake_quant_stored(x.values(), x.indices()[0], s, b, x.size(1), self.local)
            out = sparse_from_values(x.indices(), q, x.shape)
        else:
            out = a2q_fake_quant(x, s, b, self.local)
        if self.learn_bits:
            self._record(x, b, idx)
        if self.track_nnz and (not self.training or not self._nnz_from_eval):
            self.last_nnz = _row_nonzeros(out.detach())
            self._nnz_from_eval = not self.training
        return out

    def _record(self, x: Tensor, b_rows: Tensor, idx: Tensor | None) -> None:
        self._last_rows = b_rows.reshape(-1)
        self._last_row_elems = math.prod(x.shape[1:]) if x.size(0) else 0
        if self.training:
            self._eval_records = []
        else:
            deg = self.ctx.in_deg if self.ctx.in_deg is not None and self.ctx.in_deg.numel() == x.size(0) else None
            self._eval_records.append((round_half_away(b_rows.detach().reshape(-1)).cpu(),
                                       None if deg is None else deg.cpu()))

    # ------------------------------------------------------------------------------------------- accounting
    def memory_bits(self, rounded: bool = False) -> tuple[Tensor, int] | None:
        """(sum of feature bits without the sign bit, differentiable; number of elements) of the tensor.

        ``rounded``: count the stored bits round(b) per row, with a straight-through gradient to b.

        Node scheme and degree tables on a fixed graph: all nodes of that graph, from the parameters. NNS (and
        degree tables on changing graphs): the rows of the last forward call. None before any forward call.
        """
        sign = 1.0 if self.unsigned else 0.0
        if self.scheme == "node":
            b = self.effective_bits().view(-1)
        elif self.scheme == "degree" and self.ctx.fixed_num_nodes is not None and self.ctx.in_deg is not None \
                and self.ctx.in_deg.numel() == self.ctx.fixed_num_nodes and self._last_rows is not None \
                and self._last_rows.numel() == self.ctx.fixed_num_nodes:
            b = self.effective_bits().view(-1)[degree_bucket(self.ctx.in_deg, self.num_buckets, self.bucket_scheme)]
        elif self._last_rows is not None:
            b = self._last_rows
        else:
            return None
        if rounded:
            b = b + (round_half_away(b.detach()) - b.detach())
        return (b - sign).sum() * self._last_row_elems, b.numel() * self._last_row_elems

    def row_bits(self) -> tuple[Tensor, Tensor | None]:
        """Rounded signed bits per node and the nodes' in-degrees (None if unknown), for reporting.

        Fixed graph: every node, from the parameters. Otherwise: the rows of the forward calls since the last
        training call (e.g. the validation and test passes)."""
        if self.scheme == "node":
            deg = self.ctx.in_deg if self.ctx.fixed_num_nodes is not None else None
            return self.rounded_bits().view(-1).cpu(), None if deg is None else deg.cpu()
        if self.scheme == "degree" and self.ctx.fixed_num_nodes is not None and self.ctx.in_deg is not None:
            idx = degree_bucket(self.ctx.in_deg, self.num_buckets, self.bucket_scheme)
            return self.rounded_bits().view(-1)[idx].cpu(), self.ctx.in_deg.cpu()
        if not self._eval_records:
            return torch.zeros(0), None
        bits = torch.cat([r[0] for r in self._eval_records])
        degs = [r[1] for r in self._eval_records]
        return bits, (torch.cat(degs) if all(d is not None for d in degs) else None)

    def representable_max(self) -> Tensor:
        """NNS range of every pool entry (m,), for inspection."""
        return nns_range(self._effective_step().detach().view(-1), self.rounded_bits().view(-1),
                         self.nns_range_kind)

    def extra_repr(self) -> str:
        return (f"role={self.role!r}, scheme={self.scheme!r}, params={tuple(self.step.shape)}, "
                f"unsigned={self.unsigned}, local_gradient={self.local}")
