"""How often a rank dies on exit, with the old exit pattern and with `distributed.teardown`.

The adversarial case of issue 32: two gloo ranks leave all-reduces in flight on tensors whose Python objects C++
preserves, keep their group referenced past ``destroy_process_group()`` (as FSDP2's DeviceMesh does), and exit.
``plain`` returns into interpreter shutdown (what the launchers did); ``teardown`` ends through
`distributed.teardown` (barrier on every group, destroy, ``os._exit``); ``teardown-nowait`` skips the barriers,
to show that leaving without finalization alone closes the race.

    python benchmarks/teardown_race.py --runs 20     # -> benchmarks/results/teardown_race.json
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchmarks._common import machine, save_results, table_head
from distributed.launch import free_port
from distributed.teardown import exit_process, finish_process_groups

MODES = ("plain", "teardown", "teardown-nowait")
HELD = []


def _rank(rank: int, port: int, mode: str, rounds: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=timedelta(seconds=60))
    HELD.append(dist.distributed_c10d._get_default_group())
    for _ in range(rounds):
        t = torch.ones(1 << 18)
        t.tag = "preserved"  # an attribute: C++ keeps the Python object alive while the work holds the tensor
        dist.all_reduce(t, async_op=True)
    if mode == "plain":
        dist.destroy_process_group()
        return  # into interpreter shutdown, gloo threads still running
    finish_process_groups(wait=mode == "teardown")
    exit_process(0)


def run_mode(mode: str, runs: int, rounds: int) -> dict:
    ctx = mp.get_context("spawn")
    dead, signals = 0, {}
    for _ in range(runs):
        port = free_port()
        procs = [ctx.Process(target=_rank, args=(r, port, mode, rounds)) for r in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        codes = [p.exitcode for p in procs]
        dead += any(c != 0 for c in codes)
        for c in codes:
            if c is not None and c < 0:
                name = signal.Signals(-c).name
                signals[name] = signals.get(name, 0) + 1
    return {"mode": mode, "runs": runs, "runs_with_a_dead_rank": dead, "signals": signals}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20, help="two-rank runs per mode")
    p.add_argument("--rounds", type=int, default=50, help="all-reduces left in flight per rank")
    args = p.parse_args()
    if args.runs < 1 or args.rounds < 1:
        p.error("--runs and --rounds must be >= 1")
    start = time.perf_counter()
    rows = [run_mode(m, args.runs, args.rounds) for m in MODES]
    for r in rows:
        print(f"{r['mode']:<16} {r['runs_with_a_dead_rank']:>3} of {r['runs']} runs with a dead rank {r['signals']}")
    save_results("teardown_race", {"rows": rows, "rounds": args.rounds, "seconds": time.perf_counter() - start,
                                   "command": f"python benchmarks/teardown_race.py --runs {args.runs} "
                                              f"--rounds {args.rounds}", "machine": machine()})


def render(res: dict) -> list[str]:
    lines = ["## Rank exit: runs with a dead rank, old exit pattern against `distributed.teardown`", "",
             "File: `benchmarks/results/teardown_race.json`, `" + res.get("command", "") + "`. Two gloo ranks leave "
             f"{res.get('rounds')} all-reduces in flight with their group held past `destroy_process_group()` (as "
             "FSDP2's DeviceMesh does) and exit; `plain` returns into interpreter shutdown.", "",
             *table_head("exit", "runs", "runs with a dead rank", "signals")]
    for r in res.get("rows", []):
        sig = ", ".join(f"{k} x{v}" for k, v in sorted(r["signals"].items())) or "-"
        lines.append(f"| {r['mode']} | {r['runs']} | {r['runs_with_a_dead_rank']} | {sig} |")
    return lines + [""]


if __name__ == "__main__":
    main()
