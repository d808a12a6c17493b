"""Shared pieces of turning a trained quantized model into its integer golden model (torch side): the checks a
convertible model must pass, per-node steps and bitwidths of learned quantizers, degree tables, weight and input
codes, and loading a trained run (``load_trained``). Each architecture's converter is
``quant.archs.<arch>.convert``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from quant.archs import integer_archs
from quant.integer import QuantizedModel, fake_quant
from quant.qat.a2q import A2QQuantizer
from quant.qat.degree_aware import bucket_degree_ranges, degree_bucket
from quant.qat.quantizers import STEP_EPS, a2q_quantize
from quant.readout import QuantizedReadout, ReadoutLinear

SUPPORTED_METHODS = ("a2q", "degree-aware")
INPUT_FALLBACK_BITS = 8


@dataclass(frozen=True, kw_only=True)
class ConvertedModel:
    """An integer model plus what the export needs to describe it (each architecture subclasses it).

    model: the integer model (``quant.integer.QuantizedModel``); edge_index (2, E) int64 and in_degree (N,) int64 of
    the graph it runs on; input_exact: the first layer's input codes reproduce the FP32 features exactly;
    x_schemes: per layer, where ``x_steps`` come from: "input" (derived from FP32 features), "node", "degree" (and
    GIN's "channel"); degree_tables: per degree-aware quantizer, its table (:func:`degree_table`).
    """

    model: QuantizedModel
    edge_index: np.ndarray
    in_degree: np.ndarray
    input_exact: bool
    x_schemes: tuple[str, ...]
    degree_tables: dict


def check_convertible(model: nn.Module, arch: str, fn: str, graph_level: bool = False) -> None:
    """Refuse, with what to do, a model ``fn`` (a converter) cannot turn into an integer model of ``arch``.
    ``graph_level``: the converter also takes graph classifiers and batch norms between layers (folded into each
    layer's last linear map, :func:`fold_affine`)."""
    cfg = getattr(model, "cfg", None)
    qcfg = getattr(model, "_quant_cfg", None)
    if cfg is None or getattr(cfg, "arch", None) != arch:
        converters = ", ".join(f"{s.display_name}: {s.package}.convert.{s.converter}"
                               for s in integer_archs().values())
        raise ValueError(f"{fn}: this converter takes arch={arch!r} ({converters}); got arch="
                         f"{getattr(cfg, 'arch', None)!r}")
    if graph_level and (cfg.norm not in ("none", "batch") or cfg.residual):
        raise ValueError(f"{fn}: need a model without layer norm or residual (norm='none' or 'batch', "
                         f"residual=False); got norm={cfg.norm!r}, residual={cfg.residual}")
    if not graph_level and (cfg.pool != "none" or cfg.norm != "none" or cfg.residual):
        graph = "; graph classifiers export as GCN or GIN" if cfg.pool != "none" else ""
        raise ValueError(f"{fn}: need a node-task model without norm or residual (pool='none', "
                         f"norm='none', residual=False); got pool={cfg.pool!r}, norm={cfg.norm!r}, "
                         f"residual={cfg.residual}{graph}")
    if qcfg is None:
        raise ValueError(f"{fn}: the model is not quantized; call quant.qat.api.quantize_ (or load_trained) first")
    if qcfg.method not in SUPPORTED_METHODS:
        raise ValueError(f"{fn}: method {qcfg.method!r} has no integer path (Degree-Quant is affine "
                         f"with zero points); supported: {', '.join(SUPPORTED_METHODS)}")


def _step(q: A2QQuantizer) -> torch.Tensor:
    return q.step.detach().abs().clamp_min(STEP_EPS)


def per_node(q: A2QQuantizer, in_deg: torch.Tensor, who: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-node (steps (N,), signed bits (N,)) of a node or degree-scheme quantizer (``who`` names it in errors)."""
    steps, bits = _step(q).view(-1), q.rounded_bits().view(-1)
    if q.scheme == "degree":
        idx = degree_bucket(in_deg, q.num_buckets, q.bucket_scheme)
        steps, bits = steps[idx], bits[idx]
    elif q.scheme == "nns":  # the pool entry each node picked in the model's eval forward on this graph
        idx = q.last_selection
        if idx is None or idx.numel() != in_deg.numel():
            raise ValueError(f"{who}: a Nearest Neighbor (NNS) quantizer's per-node steps are its selection on the "
                             f"exported graph; run the model in eval mode on those {in_deg.numel()} nodes first")
        idx = idx.cpu()
        steps, bits = steps[idx], bits[idx]
    elif q.scheme != "node":
        raise ValueError(f"{who} uses scheme {q.scheme!r}; per-node values exist for the schemes 'node', 'degree' "
                         "and 'nns'")
    return steps.double().cpu().numpy(), bits.long().cpu().numpy()


def learned_per_node(q: nn.Module, in_deg: torch.Tensor, who: str, tables: dict, key) -> tuple[np.ndarray, np.ndarray]:
    """Per-node (steps, signed bits) of a node / degree-scheme A2Q quantizer that the integer path requires
    (``who`` names it in errors, e.g. "to_quantized_sage: convs[0].q_aggregate"); a degree table is recorded in
    ``tables[key]``."""
    if not isinstance(q, A2QQuantizer):
        raise ValueError(f"{who} is not quantized ({type(q).__name__}); the integer path needs an A2Q or "
                         "degree-aware quantizer there")
    if q.scheme == "degree":
        tables[key] = degree_table(q)
    return per_node(q, in_deg, who)


@dataclass(frozen=True)
class LayerInput:
    """A layer's input quantizer as the integer path takes it: ``steps``/``bits`` per node (``step_scheme`` "node")
    or per channel ("channel"); ``scheme`` names where they come from ("input": derived from the FP32 features, or
    the quantizer's scheme); ``codes`` (N, F) int8 for layer 0 only; ``exact``: those codes reproduce the features."""

    codes: np.ndarray | None
    steps: np.ndarray
    bits: np.ndarray
    scheme: str
    step_scheme: str
    exact: bool


def layer_input(q: nn.Module, li: int, x: np.ndarray, lookup) -> LayerInput:
    """The input of layer ``li``: layer 0 with A2Q's FP32 input gets per-node codes from :func:`input_codes`; any
    quantized input gets ``lookup(q) -> (steps, bits, step_scheme)``, and at layer 0 the codes of ``x`` (N, F)."""
    if li == 0 and not isinstance(q, A2QQuantizer):
        codes, steps, bits, exact = input_codes(x)
        return LayerInput(codes=codes, steps=steps, bits=bits, scheme="input", step_scheme="node", exact=exact)
    steps, bits, step_scheme = lookup(q)
    codes = None
    if li == 0:
        axis = (slice(None), None) if step_scheme == "node" else (None, slice(None))
        codes = fake_quant(x, steps[axis], bits[axis]).astype(np.int8)
    return LayerInput(codes=codes, steps=steps, bits=bits, scheme=q.scheme, step_scheme=step_scheme, exact=True)


def node_layer_input(q: nn.Module, li: int, x: np.ndarray, in_deg: torch.Tensor, fn: str, tables: dict
                     ) -> LayerInput:
    """:func:`layer_input` of a layer whose quantized input is per node (or per degree): its steps and bits come from
    :func:`learned_per_node` (a degree-aware table lands in ``tables[(li, "input")]``)."""
    return layer_input(q, li, x, lambda qi: (*learned_per_node(qi, in_deg, f"{fn}: convs[{li}].q_input", tables,
                                                               (li, "input")), "node"))


def norm_affine(norm: nn.Module, width: int, who: str) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha, shift)`` (width,) float64 with ``norm(y) = alpha y + shift``: an eval-mode ``BatchNorm1d``
    (``alpha = gamma / sqrt(var + eps)``, ``shift = beta - alpha mu``) or the identity (ones, zeros)."""
    if isinstance(norm, nn.Identity):
        return np.ones(width), np.zeros(width)
    if not isinstance(norm, nn.BatchNorm1d) or norm.running_mean is None or norm.training:
        raise ValueError(f"{who} must be a batch norm in eval mode with running statistics (call model.eval(); "
                         f"track_running_stats=True) or the identity; got {norm}")
    var, mu = norm.running_var.detach().double().cpu().numpy(), norm.running_mean.detach().double().cpu().numpy()
    alpha = 1.0 / np.sqrt(var + norm.eps)
    beta = np.zeros_like(alpha)
    if norm.affine:
        alpha = alpha * norm.weight.detach().double().cpu().numpy()
        beta = norm.bias.detach().double().cpu().numpy()
    return alpha, beta - alpha * mu


def fold_affine(codes: np.ndarray, steps: np.ndarray, bias: np.ndarray | None, alpha: np.ndarray,
                shift: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A per-output-channel affine map ``alpha y + shift`` after ``y = x (codes * steps)^T + bias`` folded into the
    linear map: codes (C, F) with the sign of ``alpha`` (symmetric codes: exact), steps ``steps |alpha|``, bias
    ``alpha bias + shift`` (None when both are zero). Exact in real arithmetic, so the fake-quant model (quantizer,
    then the norm) and the folded integer layer compute the same values."""
    if np.all(alpha == 1.0) and np.all(shift == 0.0):
        return codes, steps, bias
    signed = (np.where(alpha < 0, -1, 1)[:, None] * codes.astype(np.int64)).astype(codes.dtype)
    new_bias = alpha * (0.0 if bias is None else bias) + shift
    return signed, steps * np.abs(alpha), new_bias


def graph_level(model: nn.Module) -> bool:
    """Whether ``model`` classifies graphs (``pool`` "sum" / "mean"): every layer is hidden, with its norm and
    activation, and the readout (``quant.readout``) follows."""
    return getattr(model.cfg, "pool", "none") != "none"


def degree_table(q: A2QQuantizer) -> dict:
    """The learned table of a degree-aware quantizer (see `ConvertedGCN`)."""
    ranges = bucket_degree_ranges(q.num_buckets, q.bucket_scheme)
    return {"bucket_scheme": q.bucket_scheme,
            "min_degree": np.array([lo for lo, _ in ranges], dtype=np.int64),
            "max_degree": np.array([-1 if hi is None else hi for _, hi in ranges], dtype=np.int64),
            "bits": q.rounded_bits().view(-1).long().cpu().numpy(),
            "step": _step(q).view(-1).double().cpu().numpy()}


def weight_codes(linear: nn.Module, who: str) -> tuple[np.ndarray, np.ndarray, int]:
    """The model's own weight codes of a ``gnn.conv.Linear`` with a per-output-channel A2Q quantizer: codes
    (F_out, F_in) int8 ``round_haz(clamp(W / t_f))``, steps (F_out,) float64, and the one bitwidth of all rows."""
    qw = linear.q_weight
    if not (isinstance(qw, A2QQuantizer) and qw.scheme == "row"):
        raise ValueError(f"{who}.q_weight must be a per-output-channel A2Q quantizer (scheme 'row'), got "
                         f"{type(qw).__name__}")
    bits = qw.rounded_bits()
    if bits.unique().numel() != 1:
        raise ValueError(f"{who}: weight bitwidths differ per channel; the integer layer has one weight bitwidth")
    codes, _ = a2q_quantize(linear.weight.detach(), _step(qw), bits)
    return (codes.cpu().numpy().astype(np.int8), _step(qw).view(-1).double().cpu().numpy(),
            int(bits.view(-1)[0]))


def input_codes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Integer codes of FP32 features (see the module docstring). x (N, F) -> codes (N, F) int8, steps (N,)
    float64, bits (N,) int64, exact."""
    x = np.asarray(x, dtype=np.float64)
    m = np.abs(x).max(axis=1)  # (N,)
    safe = np.where(m > 0, m, 1.0)
    ratio = x / safe[:, None]
    ternary = np.all((ratio == 0) | (np.abs(ratio) == 1), axis=1)  # rows exactly {-m, 0, m}
    steps = np.where(ternary, safe, safe / (2 ** (INPUT_FALLBACK_BITS - 1) - 1))
    bits = np.where(m == 0, 1, np.where(ternary, 2, INPUT_FALLBACK_BITS)).astype(np.int64)
    codes = fake_quant(x, steps[:, None], bits[:, None]).astype(np.int8)
    return codes, steps, bits, bool(ternary[m > 0].all())


def to_quantized_readout(model: nn.Module) -> QuantizedReadout:
    """The integer readout (:mod:`quant.readout`) of a graph classifier: its pool and head, the head's weights as
    their quantizers' codes (``readout_heads`` of a ``"linear-sum"`` head, ``head[0]`` and ``head[3]`` of an
    ``"mlp"`` one)."""
    from gnn.conv.linear import Linear

    cfg = model.cfg
    lins = list(model.readout_heads) if cfg.head == "linear-sum" else [m for m in model.head if isinstance(m, Linear)]
    parts = []
    for i, lin in enumerate(lins):
        codes, steps, bits = weight_codes(lin, f"to_quantized_readout: head linear {i}")
        parts.append(ReadoutLinear(w_codes=codes, w_steps=steps, w_bits=bits,
                                   bias=None if lin.bias is None else lin.bias.detach().double().cpu().numpy()))
    return QuantizedReadout(pool=cfg.pool, head=cfg.head, readout_input=cfg.readout_input, linears=tuple(parts))


@dataclass(frozen=True, kw_only=True)
class TrainedRun:
    """A rebuilt trained model: ``model`` (eval mode, quantized, best.pt loaded), ``graph`` (GraphData),
    ``config`` (config.json), ``checkpoint`` (path of the loaded weights)."""

    model: nn.Module
    graph: object
    config: dict
    checkpoint: Path


def load_trained(run_dir: Path | str, seed_dir: str | None = None, data_root: str | None = None) -> TrainedRun:
    """Rebuild the quantized model of a ``python -m gnn.train`` run directory and load its ``best.pt``.

    ``seed_dir``: which ``seed<S>_fold<K>`` sub-directory (default: the first in sorted order). Raises ValueError
    when best.pt does not match the SHA-256 its ``result.json`` records.
    """
    from gnn.data.loaders import load_recorded
    from gnn.models import ModelConfig, build_model
    from quant.qat.api import QuantConfig, quantize_

    run_dir = Path(run_dir)
    cfg_path = run_dir / "config.json"
    if not cfg_path.is_file():
        raise FileNotFoundError(f"load_trained: {cfg_path} not found; give the --run-dir of `python -m gnn.train`")
    config = json.loads(cfg_path.read_text())
    subs = sorted(p for p in run_dir.glob("seed*_fold*") if (p / "best.pt").is_file())
    if seed_dir is not None:
        subs = [p for p in subs if p.name == seed_dir]
    if not subs:
        raise FileNotFoundError(f"load_trained: no {seed_dir or 'seed*_fold*'}/best.pt under {run_dir}")
    train = config["train"]
    if train.get("quant", "none") not in SUPPORTED_METHODS:
        raise ValueError(f"load_trained: run {run_dir} was trained with quant={train.get('quant')!r}; the export "
                         f"supports {', '.join(SUPPORTED_METHODS)}")
    graph = load_recorded(config, data_root=data_root)  # the features and split (and file) it was trained on
    model = build_model(ModelConfig(**config["model"]))
    quantize_(model, QuantConfig(method=train["quant"], target_bits=train["target_bits"],
                                 bits_control=train.get("bits_control", "penalty"),  # runs before it: the penalty
                                 quantize_mlp_hidden=train.get("quantize_mlp_hidden", False),
                                 weight_bits=train.get("weight_bits", QuantConfig.weight_bits),
                                 xw_bits=train.get("xw_bits", QuantConfig.xw_bits),
                                 learn_xw_bits=train.get("learn_xw_bits", False),
                                 hw_cost=train.get("hw_cost"), hw_arch=train.get("hw_arch") or QuantConfig.hw_arch,
                                 hw_config=train.get("hw_config"), hw_budget=train.get("hw_budget")), graph.data)
    _check_recorded_hash(subs[0])
    model.load_state_dict(torch.load(subs[0] / "best.pt", map_location="cpu", weights_only=True))
    model.eval()
    return TrainedRun(model=model, graph=graph, config=config, checkpoint=subs[0] / "best.pt")


def _check_recorded_hash(seed_dir: Path) -> None:
    """Refuse a best.pt whose SHA-256 differs from the one in ``result.json``. A run without the hash (older run
    directories, or a seed still training: result.json is written last) is loaded unchecked."""
    from gnn.rundir import sha256_file

    result = seed_dir / "result.json"
    recorded = json.loads(result.read_text()).get("best_sha256") if result.is_file() else None
    if recorded and sha256_file(seed_dir / "best.pt") != recorded:
        raise ValueError(f"load_trained: {seed_dir / 'best.pt'} does not match the SHA-256 recorded in {result}; "
                         f"the file is corrupted, retrain or restore it")
