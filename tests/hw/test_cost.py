"""hw.cost: the closed-form hardware cost against the cycle model it is derived from (hw.report.run_simulation)."""

from dataclasses import replace

import numpy as np
import pytest

from hw.config import ConfigError, preset
from hw.cost import NUMPY, PROVIDER, CostModel, moved_bytes, stream_statics
from hw.dram import DRAMChannel
from hw.layout import feature_layout
from hw.report import run_simulation
from hw.workload import workload_from_graph

BASE = preset("mega")
# configurations that move every term: bandwidth-bound, extra Condense-Edge passes, spills, slow engines
CONFIGS = {"mega": BASE, "low_bandwidth": replace(BASE, dram_bandwidth_gbs=16.0),
           "two_fifos": replace(BASE, num_eid_fifos=2, aggregation_buffer_kib=16),
           "small_buffers": replace(BASE, aggregation_buffer_kib=8, sparse_buffer_kib=1, weight_buffer_kib=1),
           "few_engines": replace(BASE, num_comb_tiles=1, num_cpe_per_tile=1, num_agg_units=16, num_decoders=1),
           "access_64": replace(BASE, dram_access_bytes=64)}


@pytest.fixture(scope="module")
def workload():
    return workload_from_graph("sbm-400", hidden=32)


def _simulated(wl, cfg) -> dict:
    r = run_simulation(wl, cfg, check=False)
    return {"dram_bytes": r["dram"]["total_bytes"], "energy_pj": r["energy_pj"]["total"], "cycles": r["total_cycles"]}


def _predicted(wl, cfg) -> dict:
    nnz = [np.count_nonzero(lt.x_codes, axis=1) for lt in wl.layers]
    return CostModel.from_workload(wl, cfg).evaluate_bits(nnz, [lt.x_bits for lt in wl.layers])


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_closed_form_matches_the_cycle_model(workload, name):
    """DRAM bytes and energy follow the cycle model's accounting (within 1 %); cycles within 10 % (the closed form
    replaces the bus calendar by per-phase bounds and runs layers one after another)."""
    cfg = CONFIGS[name]
    sim, pred = _simulated(workload, cfg), _predicted(workload, cfg)
    for key, tol in (("dram_bytes", 0.01), ("energy_pj", 0.01), ("cycles", 0.10)):
        assert pred[key] == pytest.approx(sim[key], rel=tol), (name, key, pred[key], sim[key])


def test_bits_move_the_cost_as_the_cycle_model_says(workload):
    """One more bit on the hidden layer's highest-degree tenth: the closed form at fixed constants moves the cost
    the way the cycle model does (its gradient's sign), and rebuilt at the new bits (new runs of equal bitwidth,
    as training refreshes it) it matches the cycle model again."""
    lt = workload.layers[1]
    deg = np.diff(workload.indptr)
    bits = np.where(deg >= np.quantile(deg, 0.9), np.minimum(lt.x_bits + 1, 8), lt.x_bits)
    raised = replace(workload, layers=(replace(workload.layers[0], out_bits=bits), replace(lt, x_bits=bits)))
    nnz = [np.count_nonzero(t.x_codes, axis=1) for t in workload.layers]
    model = CostModel.from_workload(workload, BASE)
    before = model.evaluate_bits(nnz, [workload.layers[0].x_bits, lt.x_bits])
    after = model.evaluate_bits(nnz, [workload.layers[0].x_bits, bits])
    sim0, sim1 = _simulated(workload, BASE), _simulated(raised, BASE)
    for key in ("dram_bytes", "energy_pj"):
        assert sim1[key] > sim0[key] and after[key] > before[key], key
        assert _predicted(raised, BASE)[key] == pytest.approx(sim1[key], rel=0.01), key


def _xw_at(workload, bits_of):
    """``workload`` with every layer's XW rows at ``bits_of(layer)`` (N,) bits, codes clipped to them."""
    layers = []
    for lt in workload.layers:
        bits = bits_of(lt)
        top = (1 << (bits - 1)) - 1
        layers.append(replace(lt, xw_bits=bits, xw_codes=np.clip(lt.xw_codes, -top[:, None], top[:, None])
                              .astype(lt.xw_codes.dtype)))
    return replace(workload, layers=tuple(layers))


@pytest.mark.parametrize("name", ["mega", "two_fifos"])
def test_learned_xw_bits_move_the_cost_as_the_cycle_model_says(workload, name):
    """XW value bits as a variable: the closed form built at per-node XW bits (random, 2..7) and evaluated at the
    XW value bits of one more bit on every row (the runs of equal bits stay where they were) follows the cycle
    model's simulation of the workload at those bits within 1 % (DRAM, energy), and rebuilt there it does too.
    ``two_fifos``: the XW stream is re-read by an extra Condense-Edge pass."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(3)
    base = _xw_at(workload, lambda lt: rng.integers(2, 8, lt.xw_bits.size))
    wider = replace(base, layers=tuple(replace(lt, xw_bits=lt.xw_bits + 1) for lt in base.layers))
    vb = [np.count_nonzero(t.x_codes, axis=1).astype(np.float64) * t.x_bits for t in base.layers]
    model = CostModel.from_workload(base, cfg)
    default = model.evaluate(vb)
    assert float(model.evaluate(vb, xw_value_bits=[None] * len(vb))["energy_pj"]) == float(default["energy_pj"])
    xw_vb = [np.count_nonzero(t.xw_codes, axis=1) * t.xw_bits.astype(np.float64) for t in wider.layers]
    got, sim0, sim1 = model.evaluate(vb, xw_value_bits=xw_vb), _simulated(base, cfg), _simulated(wider, cfg)
    for key in ("dram_bytes", "energy_pj"):
        assert sim1[key] > sim0[key] and got[key] > default[key], key
        assert got[key] == pytest.approx(sim1[key], rel=0.01), key
        assert _predicted(wider, cfg)[key] == pytest.approx(sim1[key], rel=0.01), key


def test_package_bytes_are_exact_at_the_bits_of_the_statics():
    """stream_statics + the per-bit coefficient reproduce the encoder's package and boundary bytes exactly."""
    rng = np.random.default_rng(0)
    codes = (rng.integers(-3, 4, (300, 40)) * (rng.random((300, 40)) < 0.3)).astype(np.int8)
    bits = rng.integers(3, 9, 300)
    bits[100:200] = 5  # long runs as well as short ones
    lay = feature_layout(codes, bits, "adaptive_package")
    nnz = np.count_nonzero(codes, axis=1)
    starts = np.array([0])
    st = stream_statics(nnz, bits, 40, starts)
    full = np.add.reduceat(nnz * bits * st.per_bit, starts)
    assert full[0] * 24 + st.extra_bytes[0] == pytest.approx(lay.stream["packages"].sum())
    assert (full[0] + st.extra_packages[0]) * 9 == pytest.approx(lay.stream["boundary"].sum())


def test_moved_bytes_equal_the_dram_channel():
    """Tile-by-tile requests over one aligned region move what hw.dram.DRAMChannel counts."""
    per_tile = np.array([0, 5, 130, 1, 0, 257, 64], np.float64)
    ch = DRAMChannel(BASE)
    off = 0
    for n in per_tile.astype(int):
        ch.request(0.0, off, int(n), write=False, tensor="t")
        off += int(n)
    assert moved_bytes(per_tile, BASE.dram_access_bytes, NUMPY).sum() == ch.stats.total_bytes


def test_other_dataflows_are_refused(workload):
    with pytest.raises(ValueError, match="MEGA-style"):
        CostModel.from_workload(workload, preset("hygcn"))


def test_provider_builds_from_arrays_and_prices_the_fp32_design(workload):
    """The entry-point provider: the same closed form from numpy arrays; the FP32 design costs more DRAM."""
    lts = workload.layers
    arrays = {"x_nnz": [np.count_nonzero(t.x_codes, axis=1) for t in lts], "x_bits": [t.x_bits for t in lts],
              "xw_nnz": [np.count_nonzero(t.xw_codes, axis=1) for t in lts], "xw_bits": [t.xw_bits for t in lts],
              "w_bits": [t.w_bits for t in lts], "f_in": [t.dims[1] for t in lts], "f_out": [t.dims[2] for t in lts]}
    model = PROVIDER.cost_model("mega", None, workload.edge_index, **arrays)
    got = model.evaluate_bits(arrays["x_nnz"], arrays["x_bits"])
    assert got["dram_bytes"] == pytest.approx(_predicted(workload, BASE)["dram_bytes"])
    fp32 = PROVIDER.fp32_cost("mega", None, workload.edge_index, [t.dims[1:] for t in lts], workload.num_nodes)
    assert fp32["dram_bytes"] > 2 * got["dram_bytes"]
    with pytest.raises(ConfigError):
        PROVIDER.cost_model("no-such-arch", None, workload.edge_index, **arrays)
