"""The RTL step of the main job (``python -m pipeline``; wired up by ``pipeline/steps.py``): run the exported
model's last GCN layer, whole, on the RTL accelerator top and check it.

:func:`rtl_check` takes the path of a ``quant.export`` ``.qgraph`` and the run directory. Through
:func:`hw.rtl.run.run_export` (``python -m hw.rtl.run``) it builds ``hw/rtl/accel_top.v`` for the layer (cached),
runs every tile of the layer from a memory image of the export with Verilator (Icarus when Verilator is not usable),
compares every output code with the export's ``layer<l>.out`` and the RTL's cycle counters with
:func:`hw.timing.accel_top_layer_cycles`, and prints ``RTL == model: layer L (...) bit-exact, N cycles (model: N)``.
The last layer is the narrowest (fewest lanes, input = the hidden width), so the step stays short. A mismatch raises
:class:`hw.rtl.top.LayerMismatch`; without a simulator it prints a skip line. Records and logs go to
``<run_dir>/rtl/`` (``build_root``, if given, is the build cache instead). It returns a summary dict (also written
to ``<run_dir>/rtl/rtl.json``), or ``{"skipped": reason}``.
"""

from __future__ import annotations

import json
from pathlib import Path


def choose_layer(q) -> int:
    """Index of the layer the step runs: the last one."""
    return len(q.manifest["layers"]) - 1


def rtl_check(export_path: Path, *, run_dir: Path, model: str = "gcn", build_root: Path | None = None) -> dict:
    """Run the last layer of the export at ``export_path`` (of a ``model``) on the RTL top and check it (see the
    module docstring); returns the summary, or ``{"skipped": reason}`` (with a skip line)."""
    # Imported here, at call time, so that tests can replace hw.rtl.sim.locate and hw.rtl.top.simulate_layer.
    from hw.rtl.run import run_export
    from hw.rtl.sim import locate
    from hw.rtl.top import LayerMismatch
    from quant.qgraph import load

    if model != "gcn":
        print(f"   skipped: the RTL top runs GCN layers (model={model!r})")
        return {"skipped": "not a GCN"}
    sims = {s: locate(s) for s in ("verilator", "icarus")}
    usable = [s for s, (exe, _) in sims.items() if exe is not None]
    if not usable:
        why = "; ".join(f"{s}: {reason}" for s, (_, reason) in sims.items())
        print(f"   skipped: no RTL simulator available ({why})")
        return {"skipped": why}
    q = load(export_path)
    meta, li = q.manifest["layers"], choose_layer(q)
    out_dir = (Path(run_dir) / "rtl").resolve()  # the simulator runs in its build folder: absolute paths
    build_root = Path(build_root or out_dir / "build").resolve()
    rec = run_export(export_path, layers=str(li), sim=usable[0], out=out_dir, build_dir=build_root,
                     scheduler=False)[0]
    if not rec["bit_exact"]:
        raise LayerMismatch(rec["mismatch"])
    if not rec["cycle_exact"]:
        raise LayerMismatch(f"layer {li}: RTL cycle counters {rec['rtl_phases']} differ from "
                            f"hw.timing.accel_top_layer_cycles {rec['model_phases']}")
    print(f"RTL == model: layer {li} ({meta[li]['in_dim']} -> {meta[li]['out_dim']} features, {rec['rows']} nodes in "
          f"{rec['comb_tiles']} combination + {rec['agg_tiles']} aggregation tiles) bit-exact, {rec['rtl_cycles']} "
          f"cycles (model: {rec['model_cycles']})")
    summary = {"simulator": rec["simulator"], "layer": li, "rows": rec["rows"], "tiles": rec["tiles"],
               "comb_tiles": rec["comb_tiles"], "agg_tiles": rec["agg_tiles"],
               "bit_exact": True, "rtl_cycles": int(rec["rtl_cycles"]), "model_cycles": int(rec["model_cycles"]),
               "rtl_phases": rec["rtl_phases"], "sim_cycles_per_s": rec["sim_cycles_per_s"],
               "parameters": rec["parameters"]}
    (out_dir / "rtl.json").write_text(json.dumps(summary, indent=1))
    return summary
