"""Integer GCN vs its float64 fake-quant reference, and the reference vs the project's PyG GCNConv."""

import numpy as np
import pytest
import torch
from torch import nn

from gnn.conv import GCNConv
from gnn.ops import gcn_norm
from quant.archs.gcn.integer import (
    QuantizedGCN,
    QuantizedGCNLayer,
    gcn_forward_int,
    gcn_forward_reference,
    gcn_graph,
    gcn_layer_int,
    gcn_layer_reference,
    gcn_layer_trace,
    layer_constants,
)
from quant.integer import fake_quant, int_matmul
from quant.qat.quantizers import a2q_quantize

N, F0, F1, F2 = 40, 12, 8, 3


def random_graph(rng, n=N, e=100):
    ei = rng.integers(0, n, size=(2, e))
    return np.concatenate([ei, ei[::-1]], axis=1)  # symmetric, may contain self loops and duplicates


def steps(rng, shape, lo, hi, pow2):
    return 2.0 ** (rng.integers(lo, hi, shape) if pow2 else rng.uniform(lo, hi, shape))


def make_model(rng, pow2, agg=False, psum_bits=32, frac_bits=10, xw_scheme="node"):
    x_bits = rng.integers(2, 9, N)
    xw_len = {"node": N, "channel": None}[xw_scheme]
    qmax = (1 << (x_bits - 1)) - 1
    x = rng.integers(-qmax[:, None], qmax[:, None] + 1, (N, F0)).astype(np.int8)
    l1 = QuantizedGCNLayer(
        x_steps=steps(rng, N, -4, -1, pow2), x_bits=x_bits, w_codes=rng.integers(-7, 8, (F1, F0)).astype(np.int8),
        w_steps=steps(rng, F1, -5, -2, pow2), xw_steps=steps(rng, xw_len or F1, -4, -1, pow2),
        xw_bits=np.full(xw_len or F1, 4), xw_scheme=xw_scheme,
        agg_steps=steps(rng, N, -4, -1, pow2) if agg else None, agg_bits=np.full(N, 6) if agg else None,
        bias=rng.normal(0, 0.1, F1), out_steps=steps(rng, N, -5, -2, pow2), out_bits=rng.integers(3, 7, N),
        psum_bits=psum_bits, frac_bits=frac_bits)
    l2 = QuantizedGCNLayer(
        x_steps=l1.out_steps, x_bits=l1.out_bits, w_codes=rng.integers(-7, 8, (F2, F1)).astype(np.int8),
        w_steps=steps(rng, F2, -5, -2, pow2), xw_steps=steps(rng, xw_len or F2, -4, -1, pow2),
        xw_bits=np.full(xw_len or F2, 4), xw_scheme=xw_scheme, bias=rng.normal(0, 0.1, F2), relu=False,
        psum_bits=psum_bits, frac_bits=frac_bits)
    return QuantizedGCN(x_codes=x, layers=(l1, l2))


def test_gcn_graph_matches_gnn_ops_gcn_norm():
    rng = np.random.default_rng(0)
    ei = random_graph(rng)
    indptr, indices, weight = gcn_graph(ei, N)
    ref_ei, ref_w = gcn_norm(torch.as_tensor(ei), N, dtype=torch.float64)
    dst = np.repeat(np.arange(N), np.diff(indptr))
    ours = sorted(zip(indices.tolist(), dst.tolist(), weight.tolist(), strict=True))
    theirs = sorted(zip(*ref_ei.tolist(), ref_w.tolist(), strict=True))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert a[:2] == b[:2] and a[2] == pytest.approx(b[2], rel=1e-12)


XW_SEEDS = [("node", s) for s in range(3)] + [("channel", 100 + s) for s in range(3)]  # per node / per channel XW


@pytest.mark.parametrize("agg", [False, True])
@pytest.mark.parametrize(("xw_scheme", "seed"), XW_SEEDS)
def test_integer_path_exact_with_power_of_two_scales(xw_scheme, seed, agg):
    rng = np.random.default_rng(seed)
    model, ei = make_model(rng, pow2=True, agg=agg, xw_scheme=xw_scheme), random_graph(rng)
    outs_i, logits_i = gcn_forward_int(model, ei)
    outs_r, logits_r = gcn_forward_reference(model, ei, exact_constants=False)
    assert np.array_equal(outs_i[0], outs_r[0])
    assert np.count_nonzero(outs_i[0]) > N  # non-trivial codes
    assert np.array_equal(logits_i, logits_r)  # dyadic values: float64 is exact here


@pytest.mark.parametrize(("xw_scheme", "seed", "frac_bits"),
                         [("node", 10 + s, 10) for s in range(4)] + [("channel", 110 + s, 14) for s in range(3)])
def test_integer_path_within_one_step_of_exact_reference(xw_scheme, seed, frac_bits):
    rng = np.random.default_rng(seed)
    model, ei = make_model(rng, pow2=False, xw_scheme=xw_scheme, frac_bits=frac_bits), random_graph(rng)
    outs_i, logits_i = gcn_forward_int(model, ei)
    outs_r, logits_r = gcn_forward_reference(model, ei, exact_constants=True)
    diff = np.abs(outs_i[0] - outs_r[0])
    assert diff.max() <= 1 and diff.mean() < 0.05  # hidden codes: within one quantization step
    # logits: within one XW step of the output layer per element, on the identical hidden codes
    same = np.all(outs_i[0] == outs_r[0], axis=1)
    assert np.abs(logits_i - logits_r)[same].max() <= model.layers[1].xw_steps.max()


class XWFakeQuant(nn.Module):
    """The XW fake-quant hook of a GCNConv, with a layer's XW steps and bits."""

    def __init__(self, lay: QuantizedGCNLayer):
        super().__init__()
        self.lay = lay


class NodeFakeQuant(XWFakeQuant):
    """Per node (numpy ``fake_quant``)."""

    def forward(self, v):
        lay = self.lay
        return torch.as_tensor(fake_quant(v.detach().numpy(), lay.xw_steps[:, None], lay.xw_bits[:, None])
                               * lay.xw_steps[:, None])


class ChannelFakeQuant(XWFakeQuant):
    """Per channel (A2Q's torch quantizer), what A2Q trains."""

    def forward(self, v):
        lay = self.lay
        codes, _ = a2q_quantize(v, torch.as_tensor(lay.xw_steps)[None, :],
                                torch.as_tensor(lay.xw_bits, dtype=torch.float64)[None, :])
        return codes * torch.as_tensor(lay.xw_steps)[None, :]


@pytest.mark.parametrize(("xw_scheme", "seed", "fake_quant_xw"), [("node", 5, NodeFakeQuant),
                                                                   ("channel", 121, ChannelFakeQuant)])
def test_reference_matches_pyg_gcnconv(xw_scheme, seed, fake_quant_xw):
    """Layer reference (exact constants, no requant at the output) == the project's GCNConv (float64) with the XW
    fake-quant hook of the scheme."""
    rng = np.random.default_rng(seed)
    ei = random_graph(rng)
    lay = make_model(rng, pow2=False, xw_scheme=xw_scheme).layers[0]
    lay_last = QuantizedGCNLayer(**{**lay.__dict__, "out_steps": None, "out_bits": None, "relu": False})
    x_codes = make_model(rng, pow2=False).x_codes
    x_codes = np.clip(x_codes, -((1 << (lay.x_bits - 1)) - 1)[:, None], ((1 << (lay.x_bits - 1)) - 1)[:, None])
    ref, _ = gcn_layer_reference(lay_last, x_codes, gcn_graph(ei, N), exact_constants=True)
    conv = GCNConv(F0, F1).double()
    with torch.no_grad():
        conv.lin.weight.copy_(torch.as_tensor(lay.w_codes * lay.w_steps[:, None]))
        conv.bias.copy_(torch.as_tensor(lay.bias))
    conv.q_xw = fake_quant_xw(lay)
    out = conv(torch.as_tensor(x_codes * lay.x_steps[:, None]), torch.as_tensor(ei)).detach().numpy()
    np.testing.assert_allclose(ref, out, rtol=1e-10, atol=1e-12)


def test_psum_saturation_policy():
    rng = np.random.default_rng(7)
    model, ei = make_model(rng, pow2=True, psum_bits=8, frac_bits=10), random_graph(rng)
    graph = gcn_graph(ei, N)
    lay = model.layers[0]
    with pytest.raises(OverflowError, match="8-bit"):
        gcn_layer_int(lay, model.x_codes, graph, on_overflow="raise")
    sat, _ = gcn_layer_int(lay, model.x_codes, graph)
    wide, _ = gcn_layer_int(QuantizedGCNLayer(**{**lay.__dict__, "psum_bits": 32}), model.x_codes, graph)
    assert not np.array_equal(sat, wide)  # saturation changed some codes


def test_layer_validation():
    rng = np.random.default_rng(8)
    lay = make_model(rng, pow2=True).layers[0]
    with pytest.raises(ValueError, match="xw_steps has shape"):
        QuantizedGCNLayer(**{**lay.__dict__, "xw_steps": np.ones(3)})
    with pytest.raises(ValueError, match="> 0"):
        QuantizedGCNLayer(**{**lay.__dict__, "w_steps": -lay.w_steps})
    with pytest.raises(ValueError, match="4-bit"):
        QuantizedGCNLayer(**{**lay.__dict__, "w_codes": np.full_like(lay.w_codes, 8)})
    with pytest.raises(ValueError, match="out_steps"):
        QuantizedGCN(x_codes=np.zeros((N, F0), np.int8), layers=(QuantizedGCNLayer(
            **{**lay.__dict__, "out_steps": None, "out_bits": None}), lay))


# ------------------------------------------------------------------ per-channel XW steps (what A2Q trains)


def test_channel_psum_unit_and_coefficients():
    """Channel scheme: c_e = round(w_e 2^frac) (no source step), psum of channel f in units u_f 2^-frac."""
    rng = np.random.default_rng(120)
    model, ei = make_model(rng, pow2=False, xw_scheme="channel"), random_graph(rng)
    lay = model.layers[0]
    graph = gcn_graph(ei, N)
    k = layer_constants(lay, graph)
    np.testing.assert_array_equal(k.coef, np.floor(graph[2] * 2.0**lay.frac_bits + 0.5))
    np.testing.assert_allclose(lay.psum_unit(), lay.xw_steps[None, :] * 2.0**-lay.frac_bits)
    t = gcn_layer_trace(lay, model.x_codes, graph)
    # psum really is sum_e c_e * xw_code[src] per destination (independent float64 sum, no saturation at 32 bit)
    dst = np.repeat(np.arange(N), np.diff(graph[0]))
    ref = np.zeros_like(t["psum"], dtype=np.float64)
    np.add.at(ref, dst, k.coef[:, None] * t["xw"][graph[1]])
    np.testing.assert_array_equal(t["psum"], ref)
    with pytest.raises(ValueError, match="xw_steps has shape"):
        QuantizedGCNLayer(**{**lay.__dict__, "xw_steps": np.ones(N)})
    with pytest.raises(ValueError, match="unknown xw_scheme"):
        QuantizedGCNLayer(**{**lay.__dict__, "xw_scheme": "row"})


@pytest.mark.parametrize("density", [0.0, 0.01, 0.04, 0.3])
def test_int_matmul_sparse_and_dense_paths_equal_the_dense_int64_product(density):
    """Bag-of-words codes take the CSR path (< 5% non-zero), wider ones the dense path: both exact int64."""
    rng = np.random.default_rng(3)
    codes = np.where(rng.random((300, 700)) < density, rng.integers(-127, 128, (300, 700)), 0).astype(np.int8)
    w = rng.integers(-7, 8, (33, 700)).astype(np.int8)
    got = int_matmul(codes, w)
    assert got.dtype == np.int64 and got.shape == (300, 33)
    np.testing.assert_array_equal(got, codes.astype(np.int64) @ w.astype(np.int64).T)
