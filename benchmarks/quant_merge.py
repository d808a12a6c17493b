"""Merge quantization-table cells that ran elsewhere (a lent GPU, a job beside others) into the results file.

    python benchmarks/quant_merge.py /tmp/out/quant_coauthor-cs.json /tmp/out/quant_amazon-computers.json \
        --shared-device-with "the other dataset's command of the same lease (two processes on one GPU)"
    python benchmarks/make_results.py

Each input is a file ``benchmarks/quant_table.py --out <file>`` wrote (one command each). Its cells join
``benchmarks/results/quant_table.json`` through ``quant_table._write``: a cell with the same key (dataset, model,
method, target, penalty weight and the training fields of ``_common.QUANT_TRAINING_FIELDS``) replaces the stored
one, the rest stay. The command is stored with its ``--out`` path replaced by ``<scratch file, merged>`` and, for
GPU cells, the device named. Partial files (a run stopped at its time limit) merge the cells they hold.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from benchmarks import quant_table


def merged_command(command: str, cells: list[dict]) -> str:
    """The scratch command as stored: no machine path, and the device its cells trained on."""
    command = re.sub(r"--out \S+", "--out <scratch file, merged>", command)
    devices = sorted({c["device"] for c in cells if c.get("device")})
    return command + (f" (on {', '.join(devices)})" if devices else "")


def merge(scratch_paths: list[Path], main_path: Path, shared_device_with: str | None = None,
          plots: bool = True) -> dict:
    """Merge every scratch file into ``main_path`` in order; returns the final results dict."""
    if not main_path.exists():
        raise FileNotFoundError(f"quant_merge: {main_path} does not exist; run benchmarks/quant_table.py first")
    out = {}
    for i, path in enumerate(scratch_paths):
        scratch = json.loads(path.read_text())
        commands, cells = scratch.get("commands", []), scratch.get("cells", [])
        if len(commands) != 1:
            raise ValueError(f"quant_merge: {path} holds {len(commands)} commands; merge the files of single "
                             f"quant_table.py runs (without --merge)")
        if not cells:
            print(f"quant_merge: {path} has no cells (the run stopped before its first one); skipped")
            continue
        command = merged_command(commands[0], cells)
        for c in cells:
            c["command"] = command
            if shared_device_with and c.get("device"):
                c["shared_device_with"] = shared_device_with
        previous = json.loads(main_path.read_text())
        out = quant_table._write(main_path, command, previous["seeds"], time.time(), cells, previous,
                                 plots=plots and i == len(scratch_paths) - 1)
        print(f"quant_merge: {path}: {len(cells)} cells")
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scratch", nargs="+", type=Path, help="files written by quant_table.py --out")
    p.add_argument("--into", type=Path, default=quant_table.RESULTS / "quant_table.json")
    p.add_argument("--shared-device-with", help="for GPU cells: what else ran on the same GPU at the same time "
                                                "(their times are then not alone)")
    p.add_argument("--no-plots", action="store_true")
    args = p.parse_args(argv)
    merge(args.scratch, args.into, args.shared_device_with, plots=not args.no_plots)


if __name__ == "__main__":
    main()
