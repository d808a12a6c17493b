"""Hardware cost of a quantized GCN's learned bits as a training objective (``--hw-cost dram|energy|latency``).

The accelerator side (``hw.cost``, numpy only) writes the cycle model's accounting of a combination-first GCN as a
closed form in the per-node value bits ``z_i * b_i`` (non-zero codes times bitwidth) of every layer's input, and
of its XW rows when their bits are learned too (``QuantConfig.learn_xw_bits``). This module evaluates that
form on torch tensors, with straight-through rounding, so that its gradient reaches every learned bitwidth, and
uses it in place of A2Q's memory in KB:

* ``bits_control="project"``: after every optimiser step, one common shift of the bitwidths brings the cost to its
  budget, as `quant.qat.budget` does for the memory budget, searched on the exact closed form
  (`HardwareCost.project_`);
* ``bits_control="penalty"``: ``a * relu(C / B - 1)^2`` (the A2Q hinge on the cost ratio).

``quant`` never imports ``hw``: the closed form is found through the entry point group ``quant.hardware_costs``
(the project's ``hw = "hw.cost:PROVIDER"``), as ``gnn`` finds ``quant`` (``gnn.hooks``).
The budget ``B`` is the cost of the design at ``target_bits`` (every node at the target with the model's current
non-zeros, so it follows them as the model trains), an absolute value, or a fraction of the FP32 design
(``QuantConfig.hw_budget``: ``"1.5e8"``, ``"0.25x"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points

import numpy as np
import torch
from torch import Tensor, nn

from quant.qat.quantizers import round_half_away

ENTRY_POINT_GROUP = "quant.hardware_costs"
PROJECTION_RESOLUTION = 1 / 64  # bits: how close the projection's common shift gets to the smallest that fits
REFRESH_EVERY = 10  # rebuild the closed form's constants (non-zeros, runs of equal bits) every this many steps


def _ste(fn):
    """``fn`` in the forward pass, identity gradient (straight-through)."""
    return lambda x: x + (fn(x) - x).detach() if isinstance(x, Tensor) else fn(x)


class TorchOps:
    """`hw.cost.ArrayOps` on float64 torch tensors with straight-through ceil / floor (tile ids cached)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._ids: dict = {}

    def ceil(self, x):
        return _ste(torch.ceil)(x)

    def floor(self, x):
        return _ste(torch.floor)(x)

    def segment_sum(self, values: Tensor, starts: np.ndarray) -> Tensor:
        """(T,) sums of ``values[starts[t]:starts[t+1]]`` (contiguous tiles). values: (N,)."""
        key = (starts.tobytes(), values.numel())
        if key not in self._ids:
            lengths = torch.as_tensor(np.diff(np.r_[starts, values.numel()]), device=self.device)
            self._ids[key] = torch.repeat_interleave(torch.arange(starts.size, device=self.device), lengths)
        return values.new_zeros(starts.size).index_add_(0, self._ids[key], values)

    def cumsum(self, x):
        return torch.cumsum(x, 0)

    def asarray(self, a):
        return torch.as_tensor(np.asarray(a, np.float64), dtype=torch.float64, device=self.device)


def provider():
    """The hardware cost provider registered under ``quant.hardware_costs`` (ValueError naming the fix if none)."""
    found = list(entry_points(group=ENTRY_POINT_GROUP))
    if not found:
        raise ValueError(f"--hw-cost needs a hardware cost model: no entry point in group {ENTRY_POINT_GROUP!r}; "
                         "install the project (pip install -e .) so that hw.cost registers it")
    return found[0].load()


def parse_budget(text: str | None) -> tuple[str, float] | None:
    """``None`` -> None (the design at target_bits); ``"0.25x"`` -> ("fp32", 0.25); ``"1.5e8"`` -> ("abs", 1.5e8)."""
    if text is None:
        return None
    raw = text.strip().lower()
    rel = raw.endswith("x")
    try:
        value = float(raw[:-1] if rel else raw)
    except ValueError:
        raise ValueError(f"hw_budget={text!r}: give a cost (e.g. 1.5e8, in the cost's unit: bytes, pJ or cycles) "
                         "or a fraction of the FP32 design (e.g. 0.25x)") from None
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"hw_budget={text!r} must be a positive number")
    return ("fp32", value) if rel else ("abs", value)


@dataclass(frozen=True)
class CostLayer:
    """One GCN layer as the cost sees it: its learned input quantizer (None: an unquantized first-layer input,
    whose exported codes have the fixed ``fixed_nnz`` / ``fixed_bits`` per node), its XW quantizer (learned per-node
    bits, or a fixed per-channel width), widths and weight bits. The quantizers record the non-zero codes of every
    row (``track_nnz``)."""

    q_input: nn.Module | None
    q_xw: nn.Module
    f_in: int
    f_out: int
    w_bits: int
    fixed_nnz: np.ndarray | None = None
    fixed_bits: np.ndarray | None = None

    def nnz(self) -> np.ndarray:
        return self.fixed_nnz if self.q_input is None else self.q_input.last_nnz.cpu().numpy()

    def unsigned(self) -> bool:
        return self.q_input is not None and bool(self.q_input.unsigned)

    @property
    def xw_learned(self) -> bool:
        return bool(getattr(self.q_xw, "learn_bits", False))


class HardwareCost:
    """The closed-form cost of a node-task GCN's learned input bits on one accelerator configuration.

    ``layers``: :class:`CostLayer` per GCN layer (`gcn_cost_layers`); ``edge_index`` (2, E) numpy: the graph the
    layers aggregate."""

    def __init__(self, kind: str, arch: str, config: str | None, budget: str | None, target_bits: float,
                 edge_index: np.ndarray, layers: list) -> None:
        self.kind, self.arch, self.config = kind, arch, config
        self.key = {"dram": "dram_bytes", "energy": "energy_pj", "latency": "cycles"}[kind]
        self.budget_spec, self.target_bits = parse_budget(budget), target_bits
        self.edge_index, self.layers = edge_index, layers
        self.provider = provider()
        self.model = None
        self.ops: TorchOps | None = None
        self.calls = 0
        self.budget: float | None = None
        self.projected_ratio: float | None = None  # C / B right after the last projection (its own constants)
        for layer in layers:
            layer.q_xw.track_nnz = True
            if layer.q_input is not None:
                layer.q_input.track_nnz = True
        # every learned quantizer, layer by layer, input before XW: the order of `evaluate`'s ``bits``
        self.learned = [q for layer in layers
                        for q in (layer.q_input, layer.q_xw if layer.xw_learned else None) if q is not None]

    # ---- the closed form ----------------------------------------------------------------------------------
    def _layer_arrays(self) -> dict:
        """What the provider's closed form is built from, as numpy: non-zeros and rounded bits per node."""
        x_nnz, x_bits, xw_nnz, xw_bits = [], [], [], []
        for layer in self.layers:
            q_in, q_xw = layer.q_input, layer.q_xw
            if (q_in is not None and q_in.last_nnz is None) or q_xw.last_nnz is None:
                raise ValueError("HardwareCost: the quantizers have not seen a forward pass yet")
            x_nnz.append(layer.nnz())
            x_bits.append(layer.fixed_bits if q_in is None else stored_node_bits(q_in))
            xw_nnz.append(q_xw.last_nnz.cpu().numpy())
            xw_bits.append(stored_node_bits(q_xw) if layer.xw_learned
                           else np.full(x_nnz[-1].size, int(q_xw.rounded_bits().max())))
        return {"x_nnz": x_nnz, "x_bits": x_bits, "xw_nnz": xw_nnz, "xw_bits": xw_bits,
                "w_bits": [layer.w_bits for layer in self.layers], "f_in": [layer.f_in for layer in self.layers],
                "f_out": [layer.f_out for layer in self.layers]}

    def refresh(self) -> None:
        """Rebuild the closed form's constants from the current non-zeros and bits."""
        self.model = self.provider.cost_model(self.arch, self.config, self.edge_index, **self._layer_arrays())
        if self.budget is None or self.budget_spec is None:
            self.budget = self._budget()

    def budget_now(self) -> float:
        """The budget against the current non-zeros (the design at target_bits follows them as the model trains;
        a fixed budget does not move), on the constants in force."""
        return self._budget() if self.budget_spec is None else self.budget

    def _budget(self) -> float:
        spec = self.budget_spec
        if spec is None:  # the design with every learned row at target_bits (+1 sign bit on post-ReLU rows)
            vb = [layer.nnz() * (layer.fixed_bits if layer.q_input is None else self.target_bits + layer.unsigned())
                  for layer in self.layers]
            xw_vb = [layer.q_xw.last_nnz.cpu().numpy() * float(self.target_bits) if layer.xw_learned else None
                     for layer in self.layers]
            return float(self.model.evaluate([np.asarray(v, np.float64) for v in vb], xw_value_bits=xw_vb)[self.key])
        if spec[0] == "abs":
            return spec[1]
        fp32 = self.provider.fp32_cost(self.arch, self.config, self.edge_index,
                                       [(layer.f_in, layer.f_out) for layer in self.layers],
                                       self.layers[0].nnz().size)
        return spec[1] * float(fp32[self.key])

    def evaluate(self, bits: list[Tensor] | None = None, refresh: bool = True) -> dict:
        """The cost of the current bits as torch scalars (``dram_bytes``, ``energy_pj``, ``cycles``),
        differentiable in every learned bitwidth (straight-through rounding); ``bits``: (N,) signed bits per node
        of every learned quantizer (`learned`'s order) in place of the quantizers' own; ``refresh``: count this
        call towards rebuilding the constants (`REFRESH_EVERY`); reports and budget checks do not, so they see
        what the projection saw."""
        if refresh:
            self._tick()
        device = self.learned[0].bits.device
        learned = iter(bits) if bits is not None else None

        def value_bits(q) -> Tensor:  # (N,) non-zero codes x rounded bits, straight-through
            if learned is not None:
                b = next(learned)
            else:
                b = node_bits(q)
                b = b + (round_half_away(b.detach()) - b.detach())
            return q.last_nnz.to(torch.float64) * b.to(torch.float64)

        vb, xw_vb = [], []
        for layer in self.layers:
            vb.append(torch.as_tensor(layer.fixed_nnz * layer.fixed_bits, dtype=torch.float64, device=device)
                      if layer.q_input is None else value_bits(layer.q_input))
            xw_vb.append(value_bits(layer.q_xw) if layer.xw_learned else None)
        if self.ops is None or self.ops.device != device:
            self.ops = TorchOps(device)
        return self.model.evaluate(vb, self.ops, xw_value_bits=xw_vb)

    def _tick(self) -> None:
        """Count one training step; rebuild the constants every `REFRESH_EVERY` steps (and before the first)."""
        if self.model is None or self.calls % REFRESH_EVERY == 0:
            self.refresh()
        self.calls += 1

    def cost(self) -> Tensor:
        return self.evaluate()[self.key]

    def ratio(self) -> float:
        """C / B of the current bits, on the constants in force (no refresh)."""
        with torch.no_grad():
            return float(self.evaluate(refresh=False)[self.key]) / self.budget_now()

    def report(self) -> dict:
        """JSON-able predicted cost of the current bits and the budget (constants rebuilt at these bits)."""
        self.refresh()
        with torch.no_grad():
            c = self.evaluate(refresh=False)
        out = {k: float(c[k]) for k in ("dram_bytes", "energy_pj", "cycles")}
        budget = self.budget_now()
        return {"kind": self.kind, "arch": self.arch, "config": self.config, "predicted": out,
                "budget": budget, "ratio": out[self.key] / budget}

    # ---- how the bits meet the budget ---------------------------------------------------------------------
    def penalty(self, weight: float) -> Tensor:
        """``weight * relu(C / B - 1)^2``."""
        cost = self.cost()
        return weight * torch.relu(cost / self.budget_now() - 1.0) ** 2

    @torch.no_grad()
    def project_(self) -> float:
        """Shift every learned bitwidth by one common amount ``d`` so that the cost is the largest achievable one
        not above the budget, to `PROJECTION_RESOLUTION` bits of ``d`` (every row at 1 bit if none is). Returns
        C / B after it.

        The cost falls with ``d`` in steps (rounded bits, burst rounding, the pipeline's max): a search on the
        exact closed form, galloping out from ``d = 0`` (the bits move little between steps) and then bisecting,
        finds the smallest ``d`` that meets the budget; ``d`` is then moved to the middle of its interval between
        rounding breakpoints (``d = b_i - (k + 1/2)``, where the cost is constant), so no row sits on a rounding
        tie. A linearisation instead asked rows with few non-zeros (marginal cost near 0) to drop several bits to
        cover one burst-rounding step, drove them to 1 bit, where no code is non-zero, and the model never
        recovered. The closed form's constants follow the bits every `REFRESH_EVERY` evaluations."""
        self._tick()
        start = [q.bits.detach().abs().clone() for q in self.learned]
        max_bits = self.learned[0].max_bits
        flat = torch.cat([b.view(-1) for b in start]).double()
        top, floor = float(flat.min()) - max_bits, float(flat.max()) - 1.0  # d with every row at max_bits / 1 bit

        budget = self.budget_now()  # follows the non-zeros and constants, which the shift does not move

        def ratio_at(d: float) -> float:
            for q, b in zip(self.learned, start, strict=True):
                q.bits.copy_((b - d).clamp(0.5 + 1e-3, max_bits + 0.5 - 1e-3))
            return float(self.evaluate(refresh=False)[self.key]) / budget

        step = PROJECTION_RESOLUTION
        if ratio_at(0.0) <= 1.0:  # fits: raise the bits while they still fit; the answer stays in (lo, hi]
            lo, hi = -step, 0.0
            while lo > top and ratio_at(lo) <= 1.0:
                hi, lo, step = lo, max(lo - 2 * step, top), 2 * step
            if lo <= top and ratio_at(top) <= 1.0:
                hi = lo = top
        else:  # over: lower them until they fit (the floor if nothing does)
            lo, hi = 0.0, min(step, floor)
            while hi < floor and ratio_at(hi) > 1.0:
                lo, hi, step = hi, min(hi + 2 * step, floor), 2 * step
            hi = max(hi, 0.0)
        while hi - lo > PROJECTION_RESOLUTION:
            mid = 0.5 * (lo + hi)
            if ratio_at(mid) <= 1.0:
                hi = mid
            else:
                lo = mid
        k = torch.arange(1, max_bits, dtype=torch.float64, device=flat.device)
        points = (flat[:, None] - (k[None, :] + 0.5)).reshape(-1)  # where some row's rounded bits change
        below, above = points[points <= hi], points[points > hi]
        left = float(below.max()) if below.numel() else hi - 0.5
        right = float(above.min()) if above.numel() else hi + 0.5
        self.projected_ratio = ratio_at(0.5 * (left + right))  # the same cost as at hi: no breakpoint between
        return self.projected_ratio

    def budget_ratio(self) -> float:
        """What model selection compares with 1: C / B after the last projection (the non-zeros of the next
        evaluation move both), else C / B now."""
        return self.projected_ratio if self.projected_ratio is not None else self.ratio()


def node_bits(q) -> Tensor:
    """(N,) continuous signed bits of every node of a node-scheme or degree-table quantizer (differentiable)."""
    b = q.effective_bits().view(-1)
    if q.scheme == "node":
        return b
    if q.scheme == "degree":
        from quant.qat.degree_aware import degree_bucket

        return b[degree_bucket(q.ctx.in_deg.to(b.device), q.num_buckets, q.bucket_scheme)]
    raise ValueError(f"HardwareCost: quantizer {q.role!r} has scheme {q.scheme!r}; the hardware cost needs per-node "
                     "bits of a fixed graph (node or degree scheme, node tasks)")


def stored_node_bits(q) -> np.ndarray:
    """(N,) int64 bits every node stores (rounded `node_bits`), for the closed form's constants."""
    return round_half_away(node_bits(q).detach()).cpu().numpy().astype(np.int64)


def gcn_cost_layers(model: nn.Module, x: Tensor) -> list[CostLayer]:
    """The :class:`CostLayer` of every layer of a quantized GCN on input features ``x`` (N, F) (ValueError for
    another model)."""
    from quant.qat.a2q import A2QQuantizer

    convs = getattr(model, "convs", None)
    if convs is None or not all(type(c).__name__ == "GCNConv" for c in convs):
        raise ValueError("hw_cost: the hardware cost models GCN layers (the accelerator's combination-first "
                         "dataflow); train --model gcn")
    layers = []
    for li, conv in enumerate(convs):
        q_in, q_xw = conv.q_input, conv.q_xw
        if not isinstance(q_xw, A2QQuantizer) or (li and not (isinstance(q_in, A2QQuantizer) and q_in.learn_bits)):
            raise ValueError(f"hw_cost: convs[{li}] needs learned per-node input bits and a quantized XW")
        w_bits = int(conv.lin.q_weight.rounded_bits().max())
        if isinstance(q_in, A2QQuantizer) and q_in.learn_bits:
            layers.append(CostLayer(q_in, q_xw, conv.in_dim, conv.out_dim, w_bits))
        else:  # the unquantized first input: exported as exact codes (quant.convert.input_codes)
            nnz, bits = input_rows(x)
            layers.append(CostLayer(None, q_xw, conv.in_dim, conv.out_dim, w_bits, fixed_nnz=nnz, fixed_bits=bits))
    return layers


def input_rows(x: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Non-zeros and bitwidth of every row of an unquantized input as `quant.convert.input_codes` exports it
    (1 bit for an all-zero row, 2 for a row of values in {-m, 0, m}, else the fallback width), for dense or sparse
    COO ``x`` (N, F), without densifying it. Returns two (N,) int64 arrays."""
    from quant.convert import INPUT_FALLBACK_BITS

    n = x.size(0)
    if x.is_sparse:
        x = x.coalesce()
        rows, vals = x.indices()[0], x.values().abs()
        keep = vals > 0
        rows, vals = rows[keep], vals[keep]
    else:
        rows, cols = torch.nonzero(x, as_tuple=True)
        vals = x[rows, cols].abs()
    rows, vals = rows.cpu(), vals.detach().double().cpu()
    nnz = torch.bincount(rows, minlength=n)
    top = torch.zeros(n, dtype=torch.float64).scatter_reduce_(0, rows, vals, "amax")
    off = torch.bincount(rows[vals != top[rows]], minlength=n)  # values below the row maximum
    bits = torch.where(nnz == 0, 1, torch.where(off == 0, 2, INPUT_FALLBACK_BITS))
    return nnz.numpy().astype(np.int64), bits.numpy().astype(np.int64)
