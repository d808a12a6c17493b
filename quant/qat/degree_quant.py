"""`DQQuantizer`: Degree-Quant (Tailor, Fernandez-Marques & Lane, ICLR 2021, arXiv 2008.05000) uniform INT8 /
INT4 fake quantization of one tensor, as in the released ``camlsys/degree-quant`` code with ``--gc_per``:

* per-tensor asymmetric affine quantizer, range = cumulative min / max of the per-batch percentiles
  (0.001 for INT8, 0.01 for INT4) observed in training on the *unprotected* rows; eval uses the stored range;
* gradient zeroed where the code hits qmin / qmax (`quant.qat.quantizers.AffineFakeQuant`);
* protective masking: in every training forward a Bernoulli(p_i) mask, p_i = p_low + (p_high - p_low) CDF(indeg_i)
  (drawn once per model call by `quant.qat.api`'s pre-hook), lets protected nodes bypass quantization (FP32) for node
  tensors; at eval every node is quantized.

Edge tensors (GAT scores) and weights are quantized without protection: the layer's edge list (with self loops
re-added) is not the model's, so a per-edge mask could not be derived from the node mask without layer changes.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from gnn.ops import sparse_from_values
from quant.qat.graph_context import GraphContext
from quant.qat.quantizers import affine_fake_quant, affine_qparams, percentile_range, percentile_range_stored


class DQQuantizer(nn.Module):
    """INT``num_bits`` Degree-Quant quantizer. ``kind`` "node" rows are nodes and honour the protective mask."""

    def __init__(self, *, role: str, kind: str, num_bits: int, percentile: float, ctx: GraphContext) -> None:
        super().__init__()
        if num_bits not in (4, 8):
            raise ValueError(f"DQQuantizer: num_bits={num_bits}; Degree-Quant is defined here for 4 or 8 bits")
        self.role, self.kind, self.num_bits, self.percentile, self.ctx = role, kind, num_bits, percentile, ctx
        self.register_buffer("lo", torch.tensor(float("inf")))
        self.register_buffer("hi", torch.tensor(float("-inf")))

    def _mask(self, x: Tensor) -> Tensor | None:
        m = self.ctx.dq_mask
        if not self.training or self.kind != "node" or m is None or m.numel() != x.size(0):
            return None
        return m

    @property
    def takes_sparse_rows(self) -> bool:
        """Sparse COO node tensors (N, F) are quantized on their stored values: the affine grid maps 0 to the zero
        point, so unstored zeros stay zero, and the percentiles count them (`percentile_range`)."""
        return self.kind == "node"

    def forward(self, x: Tensor) -> Tensor:
        if x.is_sparse:
            return self._forward_sparse(x)
        mask = self._mask(x)  # (N,) True = protected
        if self.training:
            observed = x if mask is None else x[~mask]
            self._observe(observed, observed.numel())
        scale, zp, qmin, qmax = self._qparams(x)
        out = affine_fake_quant(x, scale, zp, qmin, qmax)
        if mask is None:
            return out
        keep = mask.view(-1, *([1] * (x.dim() - 1)))  # (N, 1, ...)
        return torch.where(keep, x, out)

    def _forward_sparse(self, x: Tensor) -> Tensor:
        """`forward` of a sparse COO (N, F) node tensor: same values and gradients on the stored entries."""
        if not self.takes_sparse_rows or x.dim() != 2:
            raise ValueError(f"DQQuantizer({self.role}): sparse input is supported for 2-D node tensors only")
        x = x.coalesce()
        rows, values = x.indices()[0], x.values()
        mask = self._mask(x)  # (N,) True = protected
        if self.training:
            if mask is None:
                self._observe(values, math.prod(x.shape))
            else:
                self._observe(values[~mask[rows]], int((~mask).sum()) * x.size(1))
        scale, zp, qmin, qmax = self._qparams(x)
        out = affine_fake_quant(values, scale, zp, qmin, qmax)
        if mask is not None:
            out = torch.where(mask[rows], values, out)
        return sparse_from_values(x.indices(), out, x.shape)

    def _observe(self, values: Tensor, n: int) -> None:
        """Widen the stored range by the percentiles of the ``n`` elements of a training batch's unprotected rows:
        ``values`` (any shape), plus ``n - values.numel()`` unstored zeros of a sparse tensor."""
        if n > 0:
            lo, hi = percentile_range_stored(values, n, self.percentile)
            self.lo.copy_(torch.minimum(self.lo, lo))
            self.hi.copy_(torch.maximum(self.hi, hi))

    def _qparams(self, x: Tensor) -> tuple[Tensor, Tensor, int, int]:
        if torch.isfinite(self.lo) and torch.isfinite(self.hi):
            lo, hi = self.lo, self.hi
        else:  # evaluated before any training step: use this tensor's own range, do not store it
            lo, hi = percentile_range(x, self.percentile)
        return affine_qparams(lo, hi, self.num_bits)

    def extra_repr(self) -> str:
        return f"role={self.role!r}, kind={self.kind!r}, INT{self.num_bits}, percentile={self.percentile}"
