"""The public quantization API, the contract `gnn/trainer.py` calls:

    from quant.qat.api import QuantConfig, quantize_, quant_param_groups, quant_penalty, quant_summary
    quantize_(model, QuantConfig(method="a2q", target_bits=4.0), data)   # in place
    groups = quant_param_groups(model, cfg, base_lr)                     # own lrs, weight decay 0
    loss = task_loss + quant_penalty(model)                              # A2Q memory penalty (0 for DQ)
    quant_summary(model)                                                 # JSON-able bits report
    quant_config_of(model), quant_context_of(model)                      # what quantize_ attached

`gnn/trainer.py` reaches this API through the training extension of `quant.qat.training_hooks` (entry point group
``gnn.training_extensions``); ``distributed`` calls it directly.

`quantize_` replaces every `gnn.conv.QuantPoint` of a built FP32 model by a quantizer chosen by its kind / role
(`quant.qat.plan`), and registers a forward pre-hook that captures the graph of each call (`GraphContext`). ``data``
is the PyG ``Data`` of a node task (per-node parameters, in-degrees computed once; the quantizers are calibrated
by one no-grad forward) or None for graph tasks (A2Q uses the Nearest Neighbor Strategy, degree-aware tables are
indexed by the in-degrees of each batch).

Memory penalty (A2Q): ``a * relu(M - M_target)^2`` with M = sum over learned feature tensors of
``elements_per_row * sum_rows bits / 8 / 1024`` (KB, bits without the sign bit) and
``M_target = target_bits * elements / 8 / 1024``; rows = all nodes of the fixed graph (node tasks) or of the last
batch (graph tasks).
"""

from __future__ import annotations

import warnings
from collections import Counter

import torch
from torch import Tensor, nn

from quant.archs import ARCHS
from quant.qat.a2q import FEATURE_SCHEMES, A2QQuantizer
from quant.qat.budget import project_bits_, spread_model_ties_
from quant.qat.config import QuantConfig
from quant.qat.degree_quant import DQQuantizer
from quant.qat.graph_context import GraphContext, torch_bool_mask
from quant.qat.plan import plan_points
from quant.qat.quantizers import dq_protect_probability

__all__ = ["QuantConfig", "quantize_", "quant_param_groups", "quant_penalty", "attach_bit_budget", "quant_summary",
           "is_quantized", "quant_config_of", "quant_context_of"]

KB_BITS = 8 * 1024
_CTX_ATTR = "_quant_context"
_CFG_ATTR = "_quant_cfg"
_HW_ATTR = "_quant_hw_cost"


def is_quantized(model: nn.Module) -> bool:
    """Whether ``quantize_`` quantized ``model``."""
    return hasattr(model, _CFG_ATTR)


def quant_config_of(model: nn.Module) -> QuantConfig:
    """The `QuantConfig` ``model`` was quantized with (ValueError for a model ``quantize_`` did not quantize)."""
    cfg = getattr(model, _CFG_ATTR, None)
    if cfg is None:
        raise ValueError("quant_config_of: model is not quantized; call quant.qat.api.quantize_ first")
    return cfg


def quant_context_of(model: nn.Module) -> GraphContext:
    """The `GraphContext` shared by ``model``'s quantizers: the graph of the current forward (in-degrees, Degree-
    Quant's protection mask ``dq_mask``, the fixed graph of a node task). ValueError for an unquantized model."""
    ctx = getattr(model, _CTX_ATTR, None)
    if ctx is None:
        raise ValueError("quant_context_of: model is not quantized; call quant.qat.api.quantize_ first")
    return ctx


def _make_a2q(spec, cfg: QuantConfig, ctx: GraphContext, node_task: bool) -> A2QQuantizer:
    local = {"on": True, "off": False, "auto": node_task}[cfg.local_gradient]
    common = {"role": spec.role, "kind": spec.kind, "max_bits": cfg.max_bits, "ctx": ctx}
    if spec.scheme == "row":
        return A2QQuantizer(scheme="row", param_shape=(spec.width, 1), init_bits=cfg.weight_bits,
                            unsigned=False, local=False, **common)
    if spec.scheme == "head":
        bits = cfg.attention_bits if spec.kind == "vector" else cfg.edge_bits
        shape = (1, spec.width, 1) if spec.kind == "vector" else (1, spec.width)
        return A2QQuantizer(scheme="head", param_shape=shape, init_bits=bits, unsigned=False, local=False,
                            **common)
    if spec.scheme == "channel":
        return A2QQuantizer(scheme="channel", param_shape=(1, spec.width), init_bits=cfg.xw_bits,
                            unsigned=False, local=local, **common)
    init = cfg.xw_bits if spec.role == "xw" and cfg.learn_xw_bits else min(cfg.init_bits + int(spec.unsigned),
                                                                          cfg.max_bits)
    if cfg.method == "degree-aware":
        return A2QQuantizer(scheme="degree", param_shape=(cfg.num_degree_buckets, 1), init_bits=init,
                            unsigned=spec.unsigned, local=local, num_buckets=cfg.num_degree_buckets,
                            bucket_scheme=cfg.bucket_scheme, **common)
    if node_task:
        return A2QQuantizer(scheme="node", param_shape=(ctx.fixed_num_nodes, 1), init_bits=init,
                            unsigned=spec.unsigned, local=local, **common)
    return A2QQuantizer(scheme="nns", param_shape=(cfg.nns_pool_size, 1), init_bits=init, unsigned=spec.unsigned,
                        local=local, nns_range_kind=cfg.nns_range, nns_by_degree=cfg.nns_mode == "degree",
                        **common)


_CHANNEL_XW_ARCHS = tuple(name for name, spec in ARCHS.items() if spec.point_schemes.get("xw") == "channel")


def _check_fixed_bits_apply(cfg: QuantConfig, specs) -> None:
    """A fixed bitwidth set away from its default must have a quantization point to act on (else it would be
    ignored): ``xw_bits`` needs a per-channel point (GCN's XW, GIN's input; GAT's XW learns its bits per node and
    GraphSAGE has none), ``attention_bits`` / ``edge_bits`` GAT's per-head points."""
    if cfg.is_dq:
        return  # QuantConfig refuses fixed bitwidths for Degree-Quant
    if cfg.learn_xw_bits and not any(s.role == "xw" and s.scheme == "feature" and s.arch in _CHANNEL_XW_ARCHS
                                     for s in specs):
        raise ValueError("quantize_: learn_xw_bits learns the bits of GCN's per-channel XW; this model has no such "
                         "point (GAT's XW learns per-node bits already); drop the option")
    takes = {"weight_bits": lambda s: s.scheme == "row",
             "xw_bits": lambda s: s.scheme == "channel" or (s.role == "xw" and cfg.learn_xw_bits),
             "attention_bits": lambda s: s.scheme == "head" and s.kind == "vector",
             "edge_bits": lambda s: s.scheme == "head" and s.kind != "vector"}
    for name, (value, default) in cfg.changed_fixed_bits().items():
        if not any(takes[name](s) for s in specs):
            raise ValueError(f"quantize_: {name}={value} has no quantization point of this model to act on (xw_bits: "
                             f"GCN's XW and GIN's input; attention_bits / edge_bits: GAT); leave it at its default "
                             f"{default}")


def _pre_hook(module: nn.Module, args: tuple, kwargs: dict):
    ctx: GraphContext = getattr(module, _CTX_ATTR)
    x = args[0] if args else kwargs["x"]
    edge_index = args[1] if len(args) > 1 else kwargs["edge_index"]
    batch = args[2] if len(args) > 2 else kwargs.get("batch")
    ctx.update(x, edge_index, batch)
    cfg: QuantConfig = getattr(module, _CFG_ATTR)
    ctx.dq_mask = None
    if cfg.is_dq and module.training:
        _, p_low, p_high = cfg.dq_settings()
        p = dq_protect_probability(ctx.in_deg, p_low, p_high, batch)
        ctx.dq_mask = torch_bool_mask(p)
    return None


def quantize_(model: nn.Module, cfg: QuantConfig, data=None) -> nn.Module:
    """Quantize ``model`` in place (see the module docstring) and return it.

    Raises ValueError if the model has no quantization points or was already quantized.
    """
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"quantize_: cfg must be a QuantConfig, got {type(cfg).__name__}")
    if hasattr(model, _CTX_ATTR):
        raise ValueError("quantize_: model is already quantized; build a fresh FP32 model to quantize again")
    node_task = data is not None
    ctx = GraphContext(data.num_nodes, data.edge_index) if node_task else GraphContext()
    nonneg = bool(node_task and data.x is not None and data.x.numel() and data.x.min() >= 0)
    specs = plan_points(model, cfg.quantize_first_input, nonneg, cfg.quantize_mlp_hidden, cfg.learn_xw_bits)
    if not specs:
        raise ValueError("quantize_: the model has no gnn.conv.QuantPoint modules; build it from gnn.models or "
                         "gnn.conv layers")
    _check_fixed_bits_apply(cfg, specs)
    if cfg.quantize_mlp_hidden and not any(s.role == "hidden" for s in specs):
        raise ValueError("quantize_: quantize_mlp_hidden=True but the model has no MLP hidden quantization point "
                         "(GIN layers built with gnn.conv.gin.gin_mlp have one); drop the option")
    for spec in specs:
        first_input = spec.layer == 0 and spec.role == "input"
        if cfg.is_dq and first_input and not cfg.quantize_first_input:
            continue  # as A2Q: FP32 bag-of-words input (DQ's 1% percentile of a 1%-dense input is 0)
        if cfg.is_dq and spec.role == "hidden" and not cfg.quantize_mlp_hidden:
            continue
        if cfg.is_dq:
            pct, _, _ = cfg.dq_settings()
            q = DQQuantizer(role=spec.role, kind=spec.kind, num_bits=cfg.dq_bits, percentile=pct, ctx=ctx)
        elif spec.scheme is None:
            continue
        else:
            q = _make_a2q(spec, cfg, ctx, node_task)
        q.point_name = spec.name
        q.layer_index = spec.layer
        setattr(spec.parent, spec.attr, q)
    _warn_all_signed_below_two_bits(cfg, model)
    object.__setattr__(model, _CTX_ATTR, ctx)
    setattr(model, _CFG_ATTR, cfg)
    model.register_forward_pre_hook(_pre_hook, with_kwargs=True)
    param = next(model.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    model.to(device)  # the new quantizers' parameters and buffers join the model's device (graph tasks too)
    hw = _hardware_cost(model, cfg, data)
    if node_task:  # calibrate every step on the real graph (eval mode: no dropout, no DQ range update)
        was_training = model.training
        model.eval()
        with torch.no_grad():
            model(data.x.to(device), data.edge_index.to(device))
        model.train(was_training)
    model._quant_projects = _projects(cfg, node_task)
    if model._quant_projects:
        spread_model_ties_(model)
    if hw is not None:
        hw.refresh()  # the budget, from the calibrated model's non-zeros
        object.__setattr__(model, _HW_ATTR, hw)
    return model


def _hardware_cost(model: nn.Module, cfg: QuantConfig, data):
    """The hardware cost of ``cfg.hw_cost`` (`quant.qat.hw_cost`), before calibration so that its quantizers
    record their non-zeros; None without ``hw_cost``."""
    if cfg.hw_cost is None:
        return None
    if data is None:
        raise ValueError("quantize_: hw_cost needs a node task (data given): the accelerator's cost is of a fixed "
                         "graph's per-node bits")
    from quant.qat.hw_cost import HardwareCost, gcn_cost_layers

    return HardwareCost(cfg.hw_cost, cfg.hw_arch, cfg.hw_config, cfg.hw_budget, cfg.target_bits,
                        data.edge_index.cpu().numpy(), gcn_cost_layers(model, data.x))


def _projects(cfg: QuantConfig, node_task: bool) -> bool:
    """Whether the learned bits are held to the target by `quant.qat.budget` projection (else A2Q's penalty)."""
    if cfg.is_dq:
        return False
    if cfg.bits_control == "project" and not node_task:
        raise ValueError("quantize_: bits_control='project' needs a node task (data given): a graph task's Nearest "
                         "Neighbor pool has no fixed rows; use 'penalty' or 'auto'")
    projects = cfg.bits_control == "project" or (cfg.bits_control == "auto" and node_task)
    if projects and cfg.penalty_weight != QuantConfig.penalty_weight:
        raise ValueError(f"quantize_: penalty_weight={cfg.penalty_weight} acts only with A2Q's penalty, but the bits "
                         "of this node task are projected onto target_bits (bits_control='auto'); set "
                         "bits_control='penalty' to train with the penalty")
    return projects


def enforce_bit_budget_(model: nn.Module) -> None:
    """With projection, set the learned bits' stored average to the target (`quant.qat.budget.project_bits_`);
    otherwise nothing (the penalty acts through the loss). `attach_bit_budget` calls it after every step."""
    if getattr(model, "_quant_projects", False):
        hw = hardware_cost_of(model)
        if hw is not None:
            hw.project_()
        else:
            project_bits_(model, getattr(model, _CFG_ATTR).target_bits)


def attach_bit_budget(model: nn.Module, opt: torch.optim.Optimizer) -> None:
    """Make every ``opt.step()`` end with `enforce_bit_budget_(model)` (a no-op without projection), so that any
    training loop over ``opt`` holds the budget."""
    if getattr(model, "_quant_projects", False):
        opt.register_step_post_hook(lambda *_: enforce_bit_budget_(model))


SIGNED_MIN_USEFUL_BITS = 2  # a signed row of b = 1 bit has qmax = 2^0 - 1 = 0: it stores only zeros


def _warn_all_signed_below_two_bits(cfg: QuantConfig, model: nn.Module) -> None:
    """Warn when every learned-bit tensor is signed and the target is under 2 bits: the penalty can then only be
    met by driving rows to b = 1, which quantizes them to zero (GAT at the 1.7-bit target predicts one class)."""
    if cfg.is_dq:
        return
    learned = [q for _, q in _quantizers(model) if isinstance(q, A2QQuantizer) and q.learn_bits]
    if learned and not any(q.unsigned for q in learned) and cfg.target_bits < SIGNED_MIN_USEFUL_BITS:
        roles = ", ".join(sorted({q.role for q in learned}))
        warnings.warn(f"quantize_: every learned feature tensor of this model is signed (roles: {roles}; e.g. "
                      f"GAT's XW and post-ELU inputs) and target_bits={cfg.target_bits:g} < "
                      f"{SIGNED_MIN_USEFUL_BITS}: a signed row counts its sign bit, so most rows must drop to 1 bit, "
                      "which quantizes them to zero (qmax = 0): RESULTS.md's GAT runs at 1.7 bits predict one "
                      f"class. Use a target of at least {SIGNED_MIN_USEFUL_BITS} bits for such models (A2Q's "
                      "analysis_bit would report those rows one bit lower; see quant/qat/config.py)",
                      UserWarning, stacklevel=3)


def _quantizers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(n, m) for n, m in model.named_modules() if isinstance(m, A2QQuantizer | DQQuantizer)]


def quant_param_groups(model: nn.Module, cfg: QuantConfig, base_lr: float) -> list[dict]:
    """Adam parameter groups of the quantizer parameters, each with its own lr and weight decay 0.

    ``base_lr`` (the model's lr) is not used: A2Q sets absolute quantizer lrs (see `QuantConfig`).
    Degree-Quant has no learned quantizer parameters: returns [].
    """
    lrs = {"feature_step": cfg.lr_feature_step, "feature_bits": cfg.lr_feature_bits,
           "weight_step": cfg.lr_weight_step, "xw_step": cfg.lr_xw_step,
           "attention_step": cfg.lr_attention_step, "edge_step": cfg.lr_edge_step}
    groups: dict[str, list] = {k: [] for k in lrs}
    for _, q in _quantizers(model):
        if not isinstance(q, A2QQuantizer):
            continue
        if q.scheme in FEATURE_SCHEMES:
            groups["feature_step"].append(q.step)
            groups["feature_bits"].append(q.bits)
        elif q.scheme == "row":
            groups["weight_step"].append(q.step)
        elif q.scheme == "channel":
            groups["xw_step"].append(q.step)
        else:
            groups["attention_step" if q.kind == "vector" else "edge_step"].append(q.step)
    return [{"params": ps, "lr": lrs[k], "weight_decay": 0.0, "name": f"quant_{k}"}
            for k, ps in groups.items() if ps]


def memory_kb(model: nn.Module, rounded: bool = False) -> tuple[Tensor | None, float]:
    """(M, M_elements_kb): learned feature memory in KB without sign bits (differentiable) and the number of
    feature elements / 8 / 1024, so that M_target = target_bits * M_elements_kb. ``rounded``: count the stored
    (rounded) bits, straight-through."""
    total, elems = None, 0
    for _, q in _quantizers(model):
        if isinstance(q, A2QQuantizer) and q.learn_bits:
            mb = q.memory_bits(rounded)
            if mb is not None:
                total = mb[0] if total is None else total + mb[0]
                elems += mb[1]
    return (None if total is None else total / KB_BITS), elems / KB_BITS


def quant_penalty(model: nn.Module) -> Tensor:
    """Scalar memory penalty ``a * relu(M - target_bits * elements / 8192)^2`` (0 for Degree-Quant)."""
    cfg: QuantConfig | None = getattr(model, _CFG_ATTR, None)
    if cfg is None:
        raise ValueError("quant_penalty: model is not quantized; call quant.qat.api.quantize_ first")
    if getattr(model, "_quant_projects", False):  # the bits are projected onto the budget instead
        return torch.zeros(())
    hw = hardware_cost_of(model)
    if hw is not None:  # the accelerator's cost in place of the memory in KB
        return hw.penalty(cfg.penalty_weight) if cfg.penalty_weight else torch.zeros(())
    m, elems_kb = memory_kb(model, rounded=cfg.penalty_bits == "rounded")
    if cfg.is_dq or m is None or cfg.penalty_weight == 0:
        return torch.zeros(())
    return cfg.penalty_weight * torch.relu(m - cfg.target_bits * elems_kb) ** 2


def _avg(pairs: list[tuple[float, int]]) -> float | None:
    n = sum(e for _, e in pairs)
    return sum(b * e for b, e in pairs) / n if n else None


def quant_summary(model: nn.Module) -> dict:
    """JSON-able report: average feature bits without / with the sign bit (the A2Q headline uses *without*),
    per-layer bits, histogram of node bitwidths, mean bits per in-degree, compression 32 / avg bits."""
    cfg: QuantConfig | None = getattr(model, _CFG_ATTR, None)
    if cfg is None:
        raise ValueError("quant_summary: model is not quantized; call quant.qat.api.quantize_ first")
    layers, hist, deg_sum, deg_cnt, fixed = [], Counter(), Counter(), Counter(), {}
    no_sign, with_sign = [], []
    for name, q in _quantizers(model):
        if isinstance(q, DQQuantizer):
            layers.append({"name": name, "role": q.role, "kind": q.kind, "bits": q.num_bits})
            continue
        if not q.learn_bits:
            fixed[name] = int(q.rounded_bits().max())
            continue
        bits, deg = q.row_bits()
        if bits.numel() == 0:
            continue
        rep = bits - (1.0 if q.unsigned else 0.0)
        elems = q._last_row_elems
        no_sign.append((float(rep.mean()), bits.numel() * elems))
        with_sign.append((float(bits.mean()), bits.numel() * elems))
        h = Counter(int(v) for v in rep.tolist())
        for k, v in h.items():
            hist[k] += v * elems
        if deg is not None:
            for d, b in zip(deg.clamp(max=64).tolist(), rep.tolist(), strict=True):
                deg_sum[d] += b
                deg_cnt[d] += 1
        layers.append({"name": name, "role": q.role, "layer": q.layer_index, "scheme": q.scheme,
                       "unsigned": q.unsigned, "row_width": elems, "rows": bits.numel(),
                       "avg_bits": float(rep.mean()), "avg_bits_with_sign": float(bits.mean()),
                       "histogram": {str(k): h[k] for k in sorted(h)}})
    if cfg.is_dq:
        avg, avg_sign = float(cfg.dq_bits), float(cfg.dq_bits)
    else:
        avg, avg_sign = _avg(no_sign), _avg(with_sign)
    out = {
        "method": cfg.method,
        "target_bits": cfg.target_bits if not cfg.is_dq else None,
        "avg_bits": avg,
        "avg_bits_with_sign": avg_sign,
        "headline_convention": "avg_bits: learned node-feature tensors, element-weighted, without the sign bit "
                               "of post-ReLU tensors (A2Q's reported convention); Degree-Quant: uniform",
        "compression": (32.0 / avg) if avg else None,
        "compression_with_sign": (32.0 / avg_sign) if avg_sign else None,
        "layers": layers,
        "bits_histogram": {str(k): hist[k] for k in sorted(hist)},
        "mean_bits_by_in_degree": {str(d): deg_sum[d] / deg_cnt[d] for d in sorted(deg_cnt)},
        "fixed_bits": fixed,
    }
    if cfg.method == "degree-aware":
        out["degree_tables"] = degree_tables(model)
    hw = hardware_cost_of(model)
    if hw is not None:
        out["hw_cost"] = hw.report()
    return out


def hardware_cost_of(model: nn.Module):
    """The `quant.qat.hw_cost.HardwareCost` a ``hw_cost`` run attached to ``model``, else None."""
    return getattr(model, _HW_ATTR, None)


def degree_tables(model: nn.Module) -> dict[str, list[dict]]:
    """Per degree-aware quantizer: the learned table in-degree bucket -> (bits without / with sign, step)."""
    from quant.qat.degree_aware import bucket_degree_ranges

    out = {}
    for name, q in _quantizers(model):
        if isinstance(q, A2QQuantizer) and q.scheme == "degree":
            bits = q.rounded_bits().view(-1).tolist()
            steps = q.step.detach().abs().view(-1).tolist()
            ranges = bucket_degree_ranges(q.num_buckets, q.bucket_scheme)
            out[name] = [{"min_degree": lo, "max_degree": hi, "bits": b - int(q.unsigned), "bits_with_sign": b,
                          "step": s} for (lo, hi), b, s in zip(ranges, bits, steps, strict=True)]
    return out
