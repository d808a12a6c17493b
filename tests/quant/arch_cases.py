"""The quant tests' shared cases, one per integer-path architecture (GCN, GraphSAGE, GIN, GAT): a tiny graph, each
architecture's quantized model on it (learned bits and steps randomised as after training), its converter and golden
model (:data:`CASES`), small hand-built integer layers on power-of-two scales, a tiny export, the CLI on a trained Cora
run, and the slow tests' short Cora training.

A plain module, not a test file: tests/quant/conftest.py puts this folder on sys.path (tests are not a package,
``--import-mode=importlib``), so test files ``from arch_cases import ...``."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from export_metrics import check_export_metrics
from torch_geometric.data import Data

from gnn.data.loaders import GraphData
from gnn.data.splits import Split
from gnn.models import ModelConfig, build_model
from quant.archs.gat.convert import to_quantized_gat
from quant.archs.gat.integer import (
    QuantizedGAT,
    QuantizedGATLayer,
    gat_forward_int,
    gat_forward_reference,
    gat_graph,
    gat_layer_trace,
)
from quant.archs.gcn.convert import to_quantized_gcn
from quant.archs.gcn.integer import QuantizedGCN, gcn_forward_int, gcn_forward_reference, gcn_graph, gcn_layer_trace
from quant.archs.gin.convert import to_quantized_gin
from quant.archs.gin.integer import (
    QuantizedGIN,
    QuantizedGINLayer,
    gin_forward_int,
    gin_forward_reference,
    gin_graph,
    gin_layer_trace,
)
from quant.archs.sage.convert import to_quantized_sage
from quant.archs.sage.integer import (
    QuantizedSAGE,
    QuantizedSAGELayer,
    sage_forward_int,
    sage_forward_reference,
    sage_graph,
    sage_layer_trace,
)
from quant.export import export_model
from quant.qat.api import QuantConfig, quantize_
from quant.qgraph import QGraph, load
from quant.qgraph.write import write_qgraph

N, F_IN, C = 80, 24, 3
METHODS = ("a2q", "degree-aware")  # the quantization methods with an integer path


def tiny_graph(seed: int = 0) -> GraphData:
    """Row-normalised binary bag-of-words features (as Cora's), a random symmetric graph, random labels."""
    g = torch.Generator().manual_seed(seed)
    xb = (torch.rand(N, F_IN, generator=g) < 0.2).float()
    xb[0] = 0.0  # an all-zero row
    x = xb / xb.sum(dim=1, keepdim=True).clamp_min(1.0)
    ei = torch.randint(0, N, (2, 240), generator=g)
    ei = torch.cat([ei, ei.flip(0)], dim=1)
    y = torch.randint(0, C, (N,), generator=g)
    perm = torch.randperm(N, generator=g)
    split = Split(train=perm[:30], val=perm[30:50], test=perm[50:])
    return GraphData(name="tiny", task="node", data=Data(x=x, edge_index=ei, y=y), graphs=None, splits=[split],
                     num_features=F_IN, num_classes=C)


# ---------------------------------------------------------------------------------- quantized models, as trained


def _randomise(q) -> None:
    """Learned bits in [1.6, 6.4) (rounded: 2..6 signed bits, some 1-bit (all-zero) rows after clamp) and steps
    scaled by 0.15..0.5 (some clipping), as after training; a quantizer without learned bits is left as it is."""
    if hasattr(q, "learn_bits"):
        q.bits.uniform_(1.6, 6.4)
        q.step.mul_(torch.empty_like(q.step).uniform_(0.15, 0.5))


def quantized_model(graph: GraphData, method: str = "a2q", seed: int = 0, hidden: int = 8, layers: int = 2,
                    arch: str = "gcn"):
    """A quantized GCN (or GraphSAGE) with randomised learned bits and steps (as after training)."""
    torch.manual_seed(seed)
    model = build_model(ModelConfig(arch=arch, in_dim=F_IN, out_dim=C, hidden_dim=hidden, num_layers=layers))
    quantize_(model, QuantConfig(method=method, target_bits=2.0, num_degree_buckets=6), graph.data)
    with torch.no_grad():
        for conv in model.convs:
            bias, points = (conv.bias, [conv.q_input]) if arch == "gcn" else (
                conv.lin_neigh.bias, [conv.q_input, conv.q_aggregate])
            bias.normal_(0, 0.05)
            for q in points:
                _randomise(q)
    model.eval()
    return model


def quantized_sage(graph: GraphData, method: str = "a2q", seed: int = 0, hidden: int = 8, layers: int = 2):
    """A quantized GraphSAGE with randomised learned bits and steps of its inputs and neighbour means."""
    return quantized_model(graph, method, seed, hidden, layers, arch="sage")


def quantized_gin(graph: GraphData, method: str = "a2q", seed: int = 0, hidden: int = 8, layers: int = 2,
                  quantize_mlp_hidden: bool = True):
    """A quantized GIN with randomised learned bits and steps, eps, batch-norm statistics (some negative scales) and
    biases, as after training."""
    torch.manual_seed(seed)
    model = build_model(ModelConfig(arch="gin", in_dim=F_IN, out_dim=C, hidden_dim=hidden, num_layers=layers))
    quantize_(model, QuantConfig(method=method, target_bits=2.0, num_degree_buckets=6,
                                 quantize_mlp_hidden=quantize_mlp_hidden), graph.data)
    with torch.no_grad():
        model(graph.data.x, graph.data.edge_index)  # calibrates every step
        for conv in model.convs:
            conv.eps.uniform_(-0.4, 0.6)
            first, bn, _, q_hidden, second = conv.mlp
            first.bias.normal_(0, 0.1)
            second.bias.normal_(0, 0.05)
            bn.running_mean.normal_(0, 0.2)
            bn.running_var.uniform_(0.3, 2.0)
            bn.weight.uniform_(-1.5, 1.5)
            bn.bias.normal_(0, 0.2)
            for q in (conv.q_aggregate, q_hidden):
                _randomise(q)
    model.eval()
    return model


def quantized_gat(graph: GraphData, method: str = "a2q", seed: int = 0, layers: int = 3):
    """A quantized GAT (4 concatenated heads, 2 averaged heads in the last layer) with randomised learned bits and
    steps of its inputs and projected features, as after training."""
    torch.manual_seed(seed)
    model = build_model(ModelConfig(arch="gat", in_dim=F_IN, out_dim=C, hidden_dim=16, heads=4, out_heads=2,
                                    num_layers=layers))
    quantize_(model, QuantConfig(method=method, target_bits=2.0, num_degree_buckets=6), graph.data)
    with torch.no_grad():
        model(graph.data.x, graph.data.edge_index)  # calibrates every step
        for conv in model.convs:
            conv.bias.normal_(0, 0.1)
            for q in (conv.q_input, conv.q_xw):
                _randomise(q)
    model.eval()
    return model


@dataclass(frozen=True)
class ArchCase:
    """One architecture's tiny quantized model (``build(graph, method, seed=, layers=)``), its converter and its
    integer golden model (whole-model forwards, CSR builder, one layer's integer trace)."""

    build: Callable
    convert: Callable
    forward_int: Callable
    forward_reference: Callable
    graph: Callable
    trace: Callable
    model_type: type


CASES: dict[str, ArchCase] = {
    "gcn": ArchCase(quantized_model, to_quantized_gcn, gcn_forward_int, gcn_forward_reference, gcn_graph,
                    gcn_layer_trace, QuantizedGCN),
    "sage": ArchCase(quantized_sage, to_quantized_sage, sage_forward_int, sage_forward_reference, sage_graph,
                     sage_layer_trace, QuantizedSAGE),
    "gin": ArchCase(quantized_gin, to_quantized_gin, gin_forward_int, gin_forward_reference, gin_graph,
                    gin_layer_trace, QuantizedGIN),
    "gat": ArchCase(quantized_gat, to_quantized_gat, gat_forward_int, gat_forward_reference, gat_graph,
                    gat_layer_trace, QuantizedGAT),
}


def converted(arch: str, method: str = "a2q", seed: int = 0, **build_kw):
    """``(graph, model, conv)``: ``arch``'s quantized model of ``seed`` on ``tiny_graph(seed)``, converted."""
    graph = tiny_graph(seed)
    model = CASES[arch].build(graph, method, seed=seed, **build_kw)
    return graph, model, CASES[arch].convert(model, graph.data.x, graph.data.edge_index)


# ------------------------------------------------------------------ hand-built integer layers (power-of-two scales)


def pow2(rng, size, lo: int, hi: int, signed: bool = False) -> np.ndarray:
    """``size`` powers of two 2^lo..2^hi (random signs if ``signed``)."""
    sign = rng.choice([-1.0, 1.0], size=size) if signed else 1.0
    return sign * 2.0 ** rng.integers(lo, hi + 1, size=size)


def sage_pow2_layer(rng, n: int, f_in: int, f_out: int, last: bool) -> QuantizedSAGELayer:
    bits = rng.integers(2, 7, size=n)
    return QuantizedSAGELayer(
        x_steps=pow2(rng, n, -4, 0), x_bits=bits, agg_steps=pow2(rng, n, -5, -1), agg_bits=rng.integers(2, 8, size=n),
        wn_codes=rng.integers(-7, 8, size=(f_out, f_in)), wn_steps=pow2(rng, f_out, -4, -2),
        wr_codes=rng.integers(-7, 8, size=(f_out, f_in)), wr_steps=pow2(rng, f_out, -4, -2), w_bits=4,
        bias=rng.normal(0, 0.3, size=f_out), out_steps=None if last else pow2(rng, n, -3, 0),
        out_bits=None if last else rng.integers(2, 6, size=n), relu=not last, frac_bits=16, psum_bits=32)


def gin_pow2_layer(rng, n: int, f_in: int, hidden: int, f_out: int, x_scheme: str, last: bool) -> QuantizedGINLayer:
    x_len = n if x_scheme == "node" else f_in
    return QuantizedGINLayer(
        x_steps=pow2(rng, x_len, -4, 0), x_bits=rng.integers(2, 7, size=x_len), x_scheme=x_scheme, eps=0.25,
        agg_steps=pow2(rng, n, -3, 1), agg_bits=rng.integers(2, 8, size=n),
        w1_codes=rng.integers(-7, 8, size=(hidden, f_in)), w1_steps=pow2(rng, hidden, -4, -2),
        bn_scale=pow2(rng, hidden, -1, 1, signed=True), b1=rng.normal(0, 0.3, size=hidden),
        hid_steps=pow2(rng, n, -3, 0), hid_bits=rng.integers(2, 7, size=n),
        w2_codes=rng.integers(-7, 8, size=(f_out, hidden)), w2_steps=pow2(rng, f_out, -4, -2),
        b2=rng.normal(0, 0.3, size=f_out), w_bits=4, out_steps=None if last else pow2(rng, f_out, -3, 0),
        out_bits=None if last else rng.integers(2, 6, size=f_out), relu=not last, frac_bits=16, psum_bits=32)


def gat_layer(rng, n: int, f_in: int, heads: int, c: int, score_bits: int = 4, last: bool = True,
              concat: bool = True) -> QuantizedGATLayer:
    """A GAT layer of random (not power-of-two) steps."""
    return QuantizedGATLayer(
        x_steps=rng.uniform(0.05, 0.5, n), x_bits=rng.integers(2, 7, n), w_codes=rng.integers(-7, 8, (heads * c, f_in)),
        w_steps=rng.uniform(0.02, 0.1, heads * c), xw_steps=rng.uniform(0.05, 0.4, n), xw_bits=rng.integers(2, 7, n),
        heads=heads, att_src_codes=rng.integers(-7, 8, (heads, c)), att_dst_codes=rng.integers(-7, 8, (heads, c)),
        att_steps=rng.uniform(0.05, 0.2, heads), score_steps=rng.uniform(0.2, 0.8, heads), score_bits=score_bits,
        concat=concat, bias=rng.normal(0, 0.2, heads * c if concat else c),
        out_steps=None if last else rng.uniform(0.05, 0.6, n), out_bits=None if last else rng.integers(1, 8, n))


def lone_node_edges(rng, n: int) -> np.ndarray:
    """90 random edges among nodes 0..n-2 (node n-1 has no in-edges) and a repeat of the first 5 (counted twice)."""
    ei = rng.integers(0, n - 1, size=(2, 90))
    return np.concatenate([ei, ei[:, :5]], axis=1)


def exact_on_pow2(arch: str, rng, first, second, f_in: int, edge_index: np.ndarray
                  ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Chain ``second`` to ``first``'s output quantizer, draw ``f_in`` input codes per node within ``first``'s per-node
    bits, and check the integer path equals the float64 fake-quant reference with snapped constants exactly, hidden
    codes and logits. Returns ``(x_codes, per-layer integer outputs)``."""
    case = CASES[arch]
    layers = (first, type(second)(**{**second.__dict__, "x_steps": first.out_steps, "x_bits": first.out_bits}))
    qmax = 2 ** (first.x_bits - 1) - 1
    x_codes = rng.integers(-qmax[:, None], qmax[:, None] + 1, size=(first.x_bits.size, f_in))
    model = case.model_type(x_codes=x_codes, layers=layers)
    outs_i, logits_i = case.forward_int(model, edge_index, on_overflow="raise")
    outs_r, logits_r = case.forward_reference(model, edge_index, exact_constants=False)
    np.testing.assert_array_equal(outs_i[0], outs_r[0])
    np.testing.assert_array_equal(logits_i, logits_r)
    return x_codes, outs_i


# ---------------------------------------------------------------------------------------------------- exports


def export_tiny(arch: str, folder: Path):
    """``(path, model, graph)``: a degree-aware ``arch`` model on a tiny graph (seed 3 for GCN, 4 for the others),
    exported to ``folder``."""
    seed = 3 if arch == "gcn" else 4
    graph = tiny_graph(seed)
    model = CASES[arch].build(graph, "degree-aware", seed=seed)
    return export_model(model, graph, folder / f"tiny_{arch}.qgraph"), model, graph


def export_fixture(arch: str):
    """A module-scoped fixture ``exported``: :func:`export_tiny` of ``arch`` (``exported = export_fixture("gin")``)."""
    @pytest.fixture(scope="module", name="exported")
    def exported(tmp_path_factory):
        return export_tiny(arch, tmp_path_factory.mktemp(f"exp_{arch}"))

    return exported


def rewrite(q: QGraph, out: Path, edit: Callable[[dict], object]) -> Path:
    """Write ``q``'s arrays (writable copies), changed in place by ``edit(arrays)``, as a new export ``out``: its
    checksums are fresh, so only the bit-exactness check (``verify``) or the reader's completeness check objects."""
    meta = {k: v for k, v in q.manifest.items() if k not in ("format", "schema_version", "arrays")}
    arrays = {k: np.array(v) for k, v in q.arrays.items()}
    edit(arrays)
    return write_qgraph(out, arrays, meta)


def cli_train_and_export(tmp_path: Path, arch: str, name: str = "run", *train_args: str) -> QGraph:
    """The command lines ``python -m gnn.train`` (3 epochs of A2Q at 4 bits on Cora, extra ``train_args``) into
    ``tmp_path / name``, then ``python -m quant.export`` of that run, through their ``main(argv)`` in this process
    (a fresh interpreter costs seconds of imports each; tests/gnn/data/test_user_datasets.py runs both as real
    processes);
    checks what every such export must show and returns it, loaded."""
    from gnn.train import main as train_main
    from quant.export import main as export_main

    run, out = tmp_path / name, tmp_path / f"cora_{arch}_{name}.qgraph"
    with contextlib.redirect_stdout(io.StringIO()):
        train_main(["--dataset", "cora", "--model", arch, "--quant", "a2q", "--target-bits", "4", "--seeds", "1",
                    "--epochs", "3", "--run-dir", str(run), "--no-progress", *train_args])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        export_main(["--run", str(run), "--out", str(out)])
    assert f"cora {arch} (a2q)" in printed.getvalue() and "integer path" in printed.getvalue(), printed.getvalue()
    q = load(out)  # export_main verified it
    assert json.loads((out / "manifest.json").read_text())["model"]["arch"] == arch
    assert q["layer0.x_codes"].shape == (2708, 1433) and q["logits"].shape == (2708, 7)
    check_export_metrics(q, max_delta_pt=0.5, min_agreement=0.98)  # 3 epochs: near-tied logits
    return q


# ------------------------------------------------------------------------------------------------ slow: Cora


def cora_integer_and_fake_accuracy(cora, arch: str, convert, forward, **train_overrides) -> tuple[float, float]:
    """Short real A2Q training (60 epochs, seed 0) of ``arch``'s preset on Cora, then the test accuracy of the
    fake-quant model and of its integer golden model (``convert`` -> ``forward``). The slow tests of every layer."""
    from dataclasses import replace

    from gnn.presets import model_and_train_config
    from gnn.trainer import seed_everything, train_one

    model_cfg, train_cfg = model_and_train_config(cora, arch)
    train_cfg = replace(train_cfg, **{"quant": "a2q", "target_bits": 1.7, "epochs": 60, "device": "cpu",
                                      **train_overrides})
    seed_everything(0)
    model = build_model(model_cfg)
    train_one(model, cora, cora.splits[0], train_cfg, seed=0, progress=False)
    model.eval()
    d, test, y = cora.data, cora.splits[0].test.numpy(), cora.data.y.numpy()
    x = d.x.to_dense() if d.x.is_sparse else d.x
    with torch.no_grad():
        fake = model(x, d.edge_index).numpy()
    conv = convert(model, x, d.edge_index)
    _, logits = forward(conv.model, conv.edge_index, on_overflow="raise")
    return tuple(float((z[test].argmax(1) == y[test]).mean()) for z in (fake, logits))
