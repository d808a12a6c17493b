"""Named quantization points: identity in full precision, filled by `quant.quantize_` later.

A layer calls ``self.q_<name>(tensor)`` at every place where a quantized datapath would round a tensor.
In FP32 the point returns its input unchanged, so the layer code stays free of quantization logic; the
quantization package swaps the points of a built model for quantizers (one call, ``quantize_``).

``kind`` says what the rows of the tensor are, which is what a quantizer needs to know to shape its
parameters:

- ``"node"``: rows are nodes, ``(N, F)`` (input features, XW, aggregation output);
- ``"weight"``: rows are output channels, ``(F_out, F_in)``;
- ``"edge"``: rows are edges, ``(E, H)`` (GAT edge scores before the LeakyReLU);
- ``"vector"``: a parameter vector such as GAT's attention vectors ``(1, H, C)``.
"""

from __future__ import annotations

from torch import Tensor, nn

KINDS = ("node", "weight", "edge", "vector")


class QuantPoint(nn.Module):
    """Identity placeholder for a quantizer. ``role`` names the tensor (e.g. ``"xw"``)."""

    def __init__(self, role: str, kind: str) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"QuantPoint: unknown kind {kind!r}; valid kinds: {', '.join(KINDS)}")
        self.role = role
        self.kind = kind

    def forward(self, x: Tensor) -> Tensor:
        return x

    @staticmethod
    def is_identity(point: nn.Module) -> bool:
        """True while ``point`` is still the FP32 placeholder (no quantizer has been swapped in)."""
        return type(point) is QuantPoint

    def extra_repr(self) -> str:
        return f"role={self.role!r}, kind={self.kind!r}"
