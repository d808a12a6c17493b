"""`QuantConfig`: the one typed configuration of every quantization method (A2Q, degree-aware, Degree-Quant).

Bit conventions (used everywhere in ``quant``):

* A learned bitwidth is the *stored signed* width ``b`` of A2Q's symmetric grid ``[-(2^(b-1)-1), 2^(b-1)-1]``,
  clamped to ``[MIN_BITS, max_bits]`` = ``[1, 8]`` by default (so codes always fit the 1..8-bit packing of
  ``quant.formats.packing``); ``b = 1`` quantizes a row to zeros.
* Post-ReLU (non-negative) tensors use A2Q's convention: a signed ``b`` grid whose sign bit is wasted, reported as
  ``b - 1`` bits *without* the sign bit (A2Q's ``analysis_bit`` and its headline "average bits" use this).
  Signed tensors report ``b`` in both conventions. ``target_bits`` is in the *without sign bit* convention.
  A2Q's ``analysis_bit`` subtracts 1 from signed tensors too (its GAT features, post-ELU, are signed); here a
  signed ``b``-bit row is counted at ``b`` bits because it stores ``b`` bits (sign + magnitude). Only GAT's
  per-node points, the graph transformer's Q/K/V and inputs, and GIN's first aggregate on graph tasks are signed:
  at a low target these models' learned rows reach ``b = 1`` (all zeros) where A2Q's count would allow ``b = 2``
  (ternary). GCN / GraphSAGE (and so the Cora GCN headline) learn bits on post-ReLU tensors only and are the same
  in both counts.

Default hyper-parameters follow the A2Q README command for GCN-Cora (``--lr_quant_bit_fea 0.1
--lr_quant_scale_fea 0.04 --a_loss 2.5 --lr_quant_scale_weight 0.02 --lr_quant_scale_xw 0.008``), weights and
XW at fixed 4 bits, initial feature bits 4 (+1 for post-ReLU tensors), Nearest Neighbor pool m = 1000.
Degree-Quant defaults follow ``camlsys/degree-quant/runall_reddit_binary.sh`` (INT8: low 0.0, change 0.1;
INT4: low 0.1, change 0.1; percentile 0.001 / 0.01).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Literal

METHODS = ("a2q", "degree-aware", "dq-int8", "dq-int4")
MIN_BITS = 1
FIXED_BIT_FIELDS = ("weight_bits", "xw_bits", "attention_bits", "edge_bits")  # A2Q / degree-aware only
NNS_RANGES = ("code", "paper")
NNS_MODES = ("uniform", "degree")
DEGREE_BUCKETS = ("linear", "log2")
BITS_CONTROLS = ("auto", "project", "penalty")
HW_COSTS = ("dram", "energy", "latency")  # quant.qat.hw_cost: DRAM bytes, energy (pJ) or latency (cycles)


@dataclass(frozen=True, kw_only=True)
class QuantConfig:
    """How to quantize a built model.

    Attributes:
        method: ``"a2q"`` (per-node learned step and bits; NNS pool for graph tasks), ``"degree-aware"``
            (MEGA-style: step and bits shared per in-degree bucket), ``"dq-int8"`` / ``"dq-int4"``
            (Degree-Quant uniform INT8 / INT4 with protective masking).
        target_bits: average feature bits per element (without the sign bit) that the memory penalty aims at.
        bits_control: how the learned bits meet ``target_bits``. ``"project"``: after every optimiser step, one
            common shift of all learned bitwidths sets the stored average to the largest achievable value not above
            the target (`quant.qat.budget`; node tasks). ``"penalty"``: A2Q's memory penalty (below). ``"auto"``:
            project on node tasks, penalty on graph tasks (whose Nearest Neighbor pool has no fixed rows).
        penalty_weight: ``a`` in ``a * relu(M - M_target)^2`` with M in KB (A2Q's ``a_loss``); with
            ``bits_control="penalty"`` only.
        penalty_bits: which bits M counts. ``"rounded"`` (default): the bits actually stored, round(b) per node,
            with a straight-through gradient, so the penalty stays on until the *stored* average meets the target.
            ``"continuous"``: the raw float b, as A2Q's code does; with per-node bits clustered just under a
            rounding boundary it is satisfied while every node stores one bit more (e.g. continuous 2.7 signed
            bits pass a 1.7 target, and all nodes round to 3 signed = 2 reported bits).
        init_bits: initial learned feature bitwidth (post-ReLU tensors start at ``init_bits + 1``).
        max_bits: upper clamp of every signed bitwidth (1 <= max_bits <= 8).
        weight_bits, xw_bits, attention_bits, edge_bits: fixed bitwidths of weights (per output channel), XW
            (per channel), GAT attention vectors (per head) and GAT edge scores (per head); A2Q keeps them fixed.
        learn_xw_bits: learn GCN's XW bitwidths per node, as the input features' (initialised at ``xw_bits``,
            signed, counted in the memory budget and the hardware cost) instead of A2Q's fixed per-channel width:
            the XW rows are what the accelerator writes and re-reads most (``hw.cost``).
        lr_feature_step, lr_feature_bits, lr_weight_step, lr_xw_step, lr_attention_step, lr_edge_step: Adam
            learning rates of the quantizer parameter groups (weight decay 0).
        local_gradient: feature (and XW) quantizer parameters follow sign(x_q - x) (A2Q's Local Gradient) instead
            of the task gradient. ``"auto"``: on for node tasks (``data`` given), off for graph tasks (as in the
            A2Q code).
        quantize_first_input: quantize the input features of the first layer (A2Q skips them: binary features;
            applies to Degree-Quant too, whose 1% / 0.1% percentile range of a ~1%-dense bag-of-words input
            collapses to [0, 0] after dropout).
        quantize_mlp_hidden: also quantize GIN's MLP hidden activation (after batch norm and ReLU, the input of the
            second linear map) per node, as A2Q's GIN code does (Degree-Quant: per tensor, as its LinearQuantized).
            Off by default (the results tables were trained without it); a model without such a point is refused.
        nns_pool_size: m, the number of (step, bits) pairs of the Nearest Neighbor Strategy (graph tasks).
        nns_range: ``"code"`` (default, A2Q code: q_k = 2^(b_k-1) s_k) or ``"paper"`` (Alg. 1: s_k (2^(b_k-1)-1)).
        nns_mode: ``"uniform"`` (every node searches the whole pool, A2Q default) or ``"degree"`` (in-degree >= 5
            search the first 1%, 2..4 the next 9%, < 2 the remaining 90%, as A2Q's ``get_scale_index``).
        num_degree_buckets: degree-aware table size D; bucket_scheme ``"linear"`` (bucket = min(deg, D-1)) or
            ``"log2"`` (bucket = min(floor(log2(deg+1)), D-1)).
        dq_percentile: Degree-Quant range percentile (None: 0.001 for INT8, 0.01 for INT4).
        dq_low, dq_change: protection probability p = low + change * CDF(in-degree) (None: method default).
        hw_cost: with learned bits on a node task's GCN, hold the accelerator's cost (``"dram"`` bytes, ``"energy"``
            pJ or ``"latency"`` cycles of the closed form of ``hw.cost``, `quant.qat.hw_cost`) to a budget in place
            of the memory in KB: by projection (``bits_control`` project / auto) or by the penalty
            ``penalty_weight * relu(C / B - 1)^2``. None: A2Q's memory (the default).
        hw_arch, hw_config: the accelerator preset and an optional TOML file overriding its fields.
        hw_budget: the budget B: None = the cost of the design at ``target_bits``; a number = that cost; a
            number with ``x`` (``"0.25x"``) = that fraction of the FP32 design's cost.
    """

    method: Literal["a2q", "degree-aware", "dq-int8", "dq-int4"]
    target_bits: float = 4.0
    bits_control: Literal["auto", "project", "penalty"] = "auto"
    penalty_weight: float = 2.5
    penalty_bits: Literal["rounded", "continuous"] = "rounded"
    init_bits: int = 4
    max_bits: int = 8
    weight_bits: int = 4
    xw_bits: int = 4
    learn_xw_bits: bool = False
    attention_bits: int = 4
    edge_bits: int = 4
    lr_feature_step: float = 0.04
    lr_feature_bits: float = 0.1
    lr_weight_step: float = 0.02
    lr_xw_step: float = 0.008
    lr_attention_step: float = 0.005
    lr_edge_step: float = 0.005
    local_gradient: Literal["auto", "on", "off"] = "auto"
    quantize_first_input: bool = False
    quantize_mlp_hidden: bool = False
    nns_pool_size: int = 1000
    nns_range: Literal["code", "paper"] = "code"
    nns_mode: Literal["uniform", "degree"] = "uniform"
    num_degree_buckets: int = 64
    bucket_scheme: Literal["linear", "log2"] = "linear"
    dq_percentile: float | None = None
    dq_low: float | None = None
    dq_change: float | None = None
    hw_cost: Literal["dram", "energy", "latency"] | None = None
    hw_arch: str = "mega"
    hw_config: str | None = None
    hw_budget: str | None = None

    def __post_init__(self) -> None:
        name = "QuantConfig"
        self._check_hw()
        if self.method not in METHODS:
            raise ValueError(f"{name}: unknown method {self.method!r}; valid: {', '.join(METHODS)}")
        if not (isinstance(self.max_bits, int) and MIN_BITS <= self.max_bits <= 8):
            raise ValueError(f"{name}: max_bits={self.max_bits!r} is invalid; use an integer in [1, 8]")
        for field in ("init_bits", *FIXED_BIT_FIELDS):
            v = getattr(self, field)
            if not isinstance(v, int) or isinstance(v, bool) or not MIN_BITS <= v <= self.max_bits:
                raise ValueError(f"{name}: {field}={v!r} is an invalid bitwidth; use an integer in "
                                 f"[{MIN_BITS}, max_bits={self.max_bits}]")
        changed = self.changed_fixed_bits()
        if self.is_dq and changed:
            raise ValueError(f"{name}: {', '.join(changed)} set fixed bitwidths of A2Q / degree-aware; "
                             f"{self.method} quantizes every tensor at its own INT width: drop them or change "
                             f"method")
        if self.learn_xw_bits and self.is_dq:
            raise ValueError(f"{name}: learn_xw_bits learns A2Q bitwidths; {self.method} quantizes every tensor at "
                             "its own INT width: drop it or use a2q / degree-aware")
        t = self.target_bits
        if not isinstance(t, int | float) or not math.isfinite(t) or not 0.0 <= t <= self.max_bits:
            raise ValueError(f"{name}: target_bits={t!r} is invalid; give the average feature bits without the "
                             f"sign bit, a number in [0, max_bits={self.max_bits}] (e.g. 4.0 or 1.7)")
        if self.bits_control not in BITS_CONTROLS:
            raise ValueError(f"{name}: bits_control={self.bits_control!r}; valid: {', '.join(BITS_CONTROLS)}")
        if self.bits_control == "project" and self.penalty_weight != QuantConfig.penalty_weight:
            raise ValueError(f"{name}: penalty_weight={self.penalty_weight} acts only with bits_control='penalty'; "
                             "the projection meets target_bits without it")
        if self.penalty_bits not in ("rounded", "continuous"):
            raise ValueError(f"{name}: penalty_bits={self.penalty_bits!r}; valid: rounded, continuous")
        if not math.isfinite(self.penalty_weight) or self.penalty_weight < 0:  # NaN would train to a NaN loss
            raise ValueError(f"{name}: penalty_weight={self.penalty_weight} must be a finite number >= 0")
        for field in ("lr_feature_step", "lr_feature_bits", "lr_weight_step", "lr_xw_step",
                      "lr_attention_step", "lr_edge_step"):
            if getattr(self, field) < 0:
                raise ValueError(f"{name}: {field}={getattr(self, field)} must be >= 0")
        if self.local_gradient not in ("auto", "on", "off"):
            raise ValueError(f"{name}: local_gradient={self.local_gradient!r}; valid: auto, on, off")
        if self.nns_pool_size < 1:
            raise ValueError(f"{name}: nns_pool_size={self.nns_pool_size} must be >= 1 (A2Q uses 1000)")
        if self.nns_range not in NNS_RANGES:
            raise ValueError(f"{name}: nns_range={self.nns_range!r}; valid: {', '.join(NNS_RANGES)}")
        if self.nns_mode not in NNS_MODES:
            raise ValueError(f"{name}: nns_mode={self.nns_mode!r}; valid: {', '.join(NNS_MODES)}")
        if self.nns_mode == "degree" and self.nns_pool_size < 100:
            raise ValueError(f"{name}: nns_mode='degree' splits the pool 1%/9%/90%; use nns_pool_size >= 100")
        if self.num_degree_buckets < 1:
            raise ValueError(f"{name}: num_degree_buckets={self.num_degree_buckets} must be >= 1")
        if self.bucket_scheme not in DEGREE_BUCKETS:
            raise ValueError(f"{name}: bucket_scheme={self.bucket_scheme!r}; valid: {', '.join(DEGREE_BUCKETS)}")
        if self.dq_percentile is not None and not 0.0 <= self.dq_percentile < 0.5:
            raise ValueError(f"{name}: dq_percentile={self.dq_percentile} must be in [0, 0.5)")
        low, change = self.dq_low, self.dq_change
        if (low is not None and not 0 <= low <= 1) or (change is not None and not 0 <= change <= 1):
            raise ValueError(f"{name}: dq_low and dq_change must be probabilities in [0, 1]")

    def changed_fixed_bits(self) -> dict[str, tuple[int, int]]:
        """The fixed bitwidths (``FIXED_BIT_FIELDS``) set away from their defaults: name -> (value, default)."""
        return {f.name: (getattr(self, f.name), f.default) for f in fields(self)
                if f.name in FIXED_BIT_FIELDS and getattr(self, f.name) != f.default}

    @property
    def is_dq(self) -> bool:
        return self.method.startswith("dq-")

    @property
    def dq_bits(self) -> int:
        return 8 if self.method == "dq-int8" else 4

    def dq_settings(self) -> tuple[float, float, float]:
        """(percentile, p_low, p_high) of Degree-Quant, defaults from the released run script."""
        int8 = self.method == "dq-int8"
        pct = self.dq_percentile if self.dq_percentile is not None else (0.001 if int8 else 0.01)
        low = self.dq_low if self.dq_low is not None else (0.0 if int8 else 0.1)
        change = self.dq_change if self.dq_change is not None else 0.1
        return pct, low, min(low + change, 1.0)

    def _check_hw(self) -> None:
        """The hardware-cost settings: a known cost, only with learned bits, the others only with a cost."""
        if self.hw_cost is None:
            extra = [f for f in ("hw_config", "hw_budget") if getattr(self, f) is not None]
            if self.hw_arch != QuantConfig.hw_arch:
                extra.append("hw_arch")
            if extra:
                raise ValueError(f"QuantConfig: {', '.join(extra)} describe the hardware cost; add hw_cost "
                                 f"({', '.join(HW_COSTS)}) or drop them")
            return
        if self.hw_cost not in HW_COSTS:
            raise ValueError(f"QuantConfig: hw_cost={self.hw_cost!r}; valid: {', '.join(HW_COSTS)}")
        if self.method not in ("a2q", "degree-aware"):
            raise ValueError(f"QuantConfig: hw_cost needs learned bits (a2q or degree-aware), not {self.method}")
        from quant.qat.hw_cost import parse_budget

        parse_budget(self.hw_budget)
