"""Trained, quantized toy model -> :class:`ToyModel` (the shared pieces come from ``quant.convert``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gnn.ops import in_degree
from quant.convert import check_convertible, input_codes, per_node, weight_codes
from toy_arch.integer import ToyLayer, ToyModel


@dataclass(frozen=True, kw_only=True)
class ConvertedToy:
    model: ToyModel
    edge_index: np.ndarray
    in_degree: np.ndarray
    input_exact: bool


def to_quantized_toy(model: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor, psum_bits: int = 32,
                     frac_bits: int = 0) -> ConvertedToy:
    check_convertible(model, "toy", "to_quantized_toy")
    n = x.size(0)
    deg = in_degree(edge_index, n).cpu()
    x_codes, x_steps, x_bits, exact = input_codes(x.detach().cpu().numpy())  # the first input is FP32 in A2Q
    layers = []
    for li, conv in enumerate(model.convs):
        if li > 0:
            x_steps, x_bits = per_node(conv.q_input, deg, f"to_quantized_toy: convs[{li}].q_input")
        w_codes, w_steps, w_bits = weight_codes(conv.lin, f"to_quantized_toy: convs[{li}].lin")
        layers.append(ToyLayer(x_steps=x_steps, x_bits=x_bits, w_codes=w_codes, w_steps=w_steps, w_bits=w_bits,
                               bias=conv.lin.bias.detach().double().cpu().numpy(), relu=li + 1 < len(model.convs)))
    return ConvertedToy(model=ToyModel(x_codes=x_codes, layers=tuple(layers)),
                        edge_index=edge_index.cpu().numpy().astype(np.int64), in_degree=deg.numpy().astype(np.int64),
                        input_exact=exact)
