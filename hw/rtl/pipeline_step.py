"""The RTL step of the main job (``python -m pipeline``; wired up by ``pipeline/steps.py``): run one
``layer_engine`` tile of the exported model in RTL simulation and check it bit-exactly against the golden integer
model.

:func:`rtl_check` takes the path of a ``quant.export`` ``.qgraph`` and the run directory. It cuts a tile (up to
``MAX_NODES`` local nodes) of the last layer whose input width fits ``MAX_FEATURES``, simulates it with Verilator
(Icarus when Verilator is not usable), compares every psum and output element with
:func:`quant.archs.gcn.integer.gcn_layer_trace` (and the export's own arrays), and prints
``RTL == model: bit-exact, N cycles (model: M)`` with ``M`` = :func:`hw.timing.layer_engine_cycles`. A mismatch
raises :class:`hw.rtl.tile.TileMismatch`; without a simulator it prints a skip line. Builds and logs go to
``<run_dir>/rtl/`` (``build_root``, if given, is the build cache instead). It returns a summary dict (also written
to ``<run_dir>/rtl/rtl.json``), or ``{"skipped": reason}``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

MAX_NODES = 32      # local nodes of the tile (node memories of the engine)
MAX_ROWS = 12       # destination rows
MAX_FEATURES = 64   # widest layer input the step simulates (the bitmap row and weight memory are this wide)


def choose_layer(q) -> int | None:
    """Index of the last layer with an input width <= MAX_FEATURES, or None."""
    fitting = [li for li, meta in enumerate(q.manifest["layers"]) if meta["in_dim"] <= MAX_FEATURES]
    return fitting[-1] if fitting else None


def rtl_check(export_path: Path, *, run_dir: Path, model: str = "gcn", build_root: Path | None = None) -> dict:
    """Simulate one layer tile of the export at ``export_path`` (of a ``model``) in RTL and check it (see the module
    docstring); returns the summary, or ``{"skipped": reason}`` (with a skip line)."""
    # Imported here, at call time, so that tests can replace hw.rtl.sim.locate and hw.rtl.tile.simulate_tile.
    from hw.rtl.sim import locate
    from hw.rtl.tile import TileMismatch, check_tile, cut_tile, pick_rows, simulate_tile
    from quant.archs.gcn.integer import gcn_graph
    from quant.qgraph import load

    if model != "gcn":
        print(f"   skipped: the RTL tile is a GCN layer (model={model!r})")
        return {"skipped": "not a GCN"}
    q = load(export_path)
    li = choose_layer(q)
    if li is None:
        print(f"   skipped: no layer of the export has <= {MAX_FEATURES} input features to fit the RTL tile")
        return {"skipped": "no layer fits the tile"}
    sims = {s: locate(s) for s in ("verilator", "icarus")}
    usable = [s for s, (exe, _) in sims.items() if exe is not None]
    if not usable:
        why = "; ".join(f"{s}: {reason}" for s, (_, reason) in sims.items())
        print(f"   skipped: no RTL simulator available ({why})")
        return {"skipped": why}
    sim = usable[0]
    quantized = q.to_quantized_gcn()
    layer, x = quantized.layers[li], np.asarray(q[f"layer{li}.x_codes"])
    graph = gcn_graph(q["graph.edge_index"], x.shape[0])
    rows = pick_rows(graph, MAX_NODES, MAX_ROWS)
    tile = cut_tile(layer, x, graph, rows)
    for name in ("psum", "out"):  # the golden trace and the export agree on these rows
        if not np.array_equal(getattr(tile, name), np.asarray(q[f"layer{li}.{name}"], dtype=np.int64)[rows]):
            raise TileMismatch(f"the export's layer{li}.{name} differs from quant.archs.gcn.integer on rows "
                               f"{rows.tolist()}")
    out_dir = (Path(run_dir) / "rtl").resolve()  # the simulator runs in its build folder: absolute paths
    build_root = Path(build_root or out_dir / "build").resolve()
    res = simulate_tile(tile, sim=sim, build_root=build_root, work_dir=out_dir / "tile", max_nodes=MAX_NODES,
                        log_file=out_dir / "sim.log")
    check_tile(tile, res)  # raises TileMismatch naming the first differing element
    model_cycles = tile.predicted_cycles()
    print(f"RTL == model: bit-exact, {res['cycles']} cycles (model: {model_cycles})")
    summary = {"simulator": sim, "layer": li, "rows": rows.tolist(), "local_nodes": int(tile.nodes.shape[0]),
               "lanes": int(tile.w_codes.shape[0]), "features": int(tile.x_codes.shape[1]), "bit_exact": True,
               "rtl_cycles": int(res["cycles"]), "model_cycles": int(model_cycles),
               "parameters": tile.parameters(MAX_NODES)}
    (out_dir / "rtl.json").write_text(json.dumps(summary, indent=1))
    return summary
