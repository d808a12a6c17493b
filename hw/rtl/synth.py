"""Yosys generic-cell counts per RTL module and configuration -> benchmarks/results/rtl_cells.json (relative area).

``python -m hw.rtl.synth [--out PATH] [--only MODULE ...] [--timeout S]`` (what ``make synth`` runs). Flow per
(module, parameters): ``read_verilog -sv <sources>; chparam -set <k> <v> <top>; synth -top <top> -flatten; stat``,
i.e. Yosys's own generic gate library ($_AND_, $_XOR_, $_MUX_, $_DFF*_ ...), memories mapped to flip-flops.
The relative area weights each generic cell by a rough NAND2-equivalent (``GATE_EQUIVALENTS``); it is a *relative*
estimate for comparing units and configurations, NOT a 28 nm (or any technology's) area or timing result.
Exits 0 with a message when ``yosys`` is not on PATH (nothing is written then).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

RTL = Path(__file__).resolve().parent
DEFAULT_OUT = RTL.parents[1] / "benchmarks" / "results" / "rtl_cells.json"
# module -> (sources, list of parameter configurations)
MODULES: dict[str, tuple[list[str], list[dict[str, int]]]] = {
    "requant": (["requant.v"], [{"OUT_BITS": 8}, {"OUT_BITS": 4}]),
    "aggregation_unit": (["aggregation_unit.v"], [{"LANES": 4, "PSUM_BITS": 16}, {"LANES": 8, "PSUM_BITS": 16}]),
    "bse": (["bse.v"], [{}]),
    "cpe": (["cpe.v", "bse.v"], [{"LANES": 4, "MAX_ROW_VALUES": 64}, {"LANES": 8, "MAX_ROW_VALUES": 64}]),
    "ap_decoder": (["ap_decoder.v"], [{"MAX_NODES": 16, "NODE_BITS": 4, "MAX_FEATURES": 8, "FEAT_BITS": 3},
                                      {"MAX_NODES": 64, "NODE_BITS": 6, "MAX_FEATURES": 16, "FEAT_BITS": 4}]),
    "eid_matcher": (["eid_matcher.v"], [{"NUM_FIFOS": 4, "DEPTH": 4}, {"NUM_FIFOS": 16, "DEPTH": 8}]),
    "output_stage": (["output_stage.v"], [{"LANES": 1, "PSUM_BITS": 16}, {"LANES": 4, "PSUM_BITS": 16}]),
    "layer_engine": (["bse.v", "cpe.v", "requant.v", "aggregation_unit.v", "ap_decoder.v", "output_stage.v",
                      "layer_engine.v"], [{"LANES": 1, "MAX_NODES": 8, "NODE_BITS": 3, "MAX_FEATURES": 8,
                                           "FEAT_BITS": 3}]),
    # the whole-layer top (controller + engine + tile buffers); memories as flip-flops, so only small tiles
    "accel_top": (["bse.v", "cpe.v", "requant.v", "aggregation_unit.v", "ap_decoder.v", "output_stage.v",
                   "layer_engine.v", "accel_top.v"],
                  # (chparam elaborates after each parameter: MAX_ROWS before NODE_BITS keeps every step legal)
                  [{"LANES": 1, "MAX_ROWS": 4, "MAX_NODES": 8, "NODE_BITS": 3, "MAX_FEATURES": 8, "FEAT_BITS": 3,
                    "MAX_PKGS": 8, "MAX_WORDS": 8, "MAX_EDGES": 16, "ADDR_BITS": 16},
                   {"LANES": 2, "MAX_ROWS": 8, "MAX_NODES": 16, "NODE_BITS": 4, "MAX_FEATURES": 16, "FEAT_BITS": 4,
                    "MAX_PKGS": 16, "MAX_WORDS": 16, "MAX_EDGES": 32, "ADDR_BITS": 20}]),
}
# rough NAND2-equivalents of Yosys's generic cells (relative weights only)
GATE_EQUIVALENTS = {"NOT": 0.67, "BUF": 0.67, "NAND": 1.0, "NOR": 1.0, "AND": 1.33, "OR": 1.33, "ANDNOT": 1.33,
                    "ORNOT": 1.33, "XOR": 2.33, "XNOR": 2.33, "MUX": 2.33, "AOI3": 1.33, "OAI3": 1.33,
                    "AOI4": 1.67, "OAI4": 1.67, "NMUX": 2.33, "DFF": 4.67}
NOTE = ("Yosys generic cells (synth -flatten; stat). rel_area = sum of cells x rough NAND2-equivalents "
        "(GATE_EQUIVALENTS, flip-flops 4.67): a relative estimate to compare units and configurations, not a 28 nm "
        "(or any technology's) area, timing or power result.")


def parse_stat(text: str) -> dict[str, int]:
    """Cell types and counts of the last ``stat`` report in Yosys output: {"$_AND_": 12, ..., "total": N}."""
    blocks = text.split("Number of cells:")
    if len(blocks) < 2:
        raise RuntimeError(f"yosys printed no cell statistics:\n{text[-2000:]}")
    last = blocks[-1]
    total = int(last.split()[0])
    cells = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s+(\$\S+|\S+)\s+(\d+)\s*$", last, flags=re.M)}
    if sum(cells.values()) != total:
        raise RuntimeError(f"yosys cell list sums to {sum(cells.values())}, 'Number of cells' says {total}")
    return {**cells, "total": total}


def gate_equivalents(cells: dict[str, int]) -> float:
    """Relative area: each ``$_<KIND>_...`` cell weighted by GATE_EQUIVALENTS (flip-flop variants as DFF)."""
    area = 0.0
    for name, n in cells.items():
        if name == "total":
            continue
        kind = name.strip("$_").split("_")[0]
        kind = "DFF" if "DFF" in kind or "DLATCH" in kind else kind
        if kind not in GATE_EQUIVALENTS:
            raise RuntimeError(f"no gate-equivalent weight for yosys cell {name}; add it to GATE_EQUIVALENTS")
        area += GATE_EQUIVALENTS[kind] * n
    return round(area, 1)


def synth_script(top: str, files: list[str], params: dict[str, int]) -> str:
    chparam = "".join(f"chparam -set {k} {v} {top}; " for k, v in params.items())
    return (f"read_verilog -sv {' '.join(str(RTL / f) for f in files)}; {chparam}"
            f"synth -top {top} -flatten; stat")


def synth_one(yosys: str, top: str, files: list[str], params: dict[str, int], timeout: float) -> dict:
    t0 = time.time()
    try:
        proc = subprocess.run([yosys, "-p", synth_script(top, files, params)], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"params": params, "error": f"yosys did not finish in {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"params": params, "error": (proc.stderr or proc.stdout)[-500:]}
    cells = parse_stat(proc.stdout)
    return {"params": params, "cells": cells["total"], "rel_area": gate_equivalents(cells),
            "cell_types": {k: v for k, v in cells.items() if k != "total"}, "seconds": round(time.time() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--only", nargs="*", choices=sorted(MODULES), help="modules to synthesize (default: all)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per yosys run")
    args = parser.parse_args(argv)
    yosys = shutil.which("yosys")
    if yosys is None:
        print("hw.rtl.synth: skipped: `yosys` is not on PATH; install it (e.g. `apt install yosys`) to measure "
              "cell counts. Nothing written.")
        return 0
    version = subprocess.run([yosys, "-V"], capture_output=True, text=True).stdout.strip()
    out = Path(args.out)
    old = json.loads(out.read_text()).get("modules", {}) if out.is_file() else {}
    modules = dict(old)
    for top in args.only or list(MODULES):
        files, configs = MODULES[top]
        modules[top] = []
        for params in configs:
            r = synth_one(yosys, top, files, params, args.timeout)
            modules[top].append(r)
            print(f"{top} {params}: " + (f"{r['cells']} cells, rel. area {r['rel_area']} ({r['seconds']} s)"
                                         if "cells" in r else f"FAILED: {r['error']}"), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"tool": version, "flow": "read_verilog -sv; chparam; synth -top X -flatten; stat",
                               "note": NOTE, "gate_equivalents": GATE_EQUIVALENTS, "modules": modules}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
