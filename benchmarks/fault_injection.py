"""Fault injection: kill -9 of one rank at a random moment, resume, compare with the uninterrupted run.

    python benchmarks/fault_injection.py --runs 20     # -> benchmarks/results/fault_injection.json

The job: ``torchrun --standalone --nproc-per-node 2 -m distributed.train`` on Cora with dropout on and the stateful
halo exchange (stochastic int2 codec, pipelined stale halos, delta references), checkpointing every K epochs and
passing ``--resume`` on every start. The uninterrupted reference runs once; the moments its checkpoints are switched
in (``latest.json``) give the kill window. Each faulted run starts the same job, waits for its first checkpoint,
sleeps a random delay (seeded) up to the reference's time from its first to its last checkpoint, sends SIGKILL to a
random rank (torchrun then ends the job), and restarts it. A run is equal when every epoch's loss, validation and
test accuracy and exchange bytes and the best record equal the reference bitwise. Linux only (worker ranks are found
through /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import machine, save_results, table_head
from gnn.cli import UsageError

ROOT = Path(__file__).resolve().parents[1]
METRICS = ("epoch", "loss", "val_acc", "test_acc", "exchange_bytes")
BEST = ("best_val_acc", "test_acc_at_best_val", "best_epoch")
POLL_S = 0.01


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=10, help="faulted runs (each: one kill -9, one resume)")
    p.add_argument("--seed", type=int, default=0, help="seed of the kill moments and ranks")
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--checkpoint-every", type=int, default=4)
    p.add_argument("--exchange", default="int2", help="forward halo codec (distributed.codecs)")
    p.add_argument("--dataset", default="cora")
    p.add_argument("--job-timeout-s", type=float, default=600, help="wall-clock limit of one torchrun job")
    args = p.parse_args(argv)
    if args.runs < 1 or args.epochs < 2 or args.checkpoint_every < 1 or args.job_timeout_s <= 0:
        p.error("need --runs >= 1, --epochs >= 2, --checkpoint-every >= 1 and --job-timeout-s > 0")
    return args


def job_command(args: argparse.Namespace, work: Path) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
            "-m", "distributed.train", "--dataset", args.dataset, "--hidden", "16", "--epochs", str(args.epochs),
            "--exchange", args.exchange, "--pipeline", "--sync-every", "4", "--delta", "--refresh-every", "3",
            "--log-every", "0", "--checkpoint-dir", str(work / "ck"), "--checkpoint-every",
            str(args.checkpoint_every), "--resume", "--metrics-log", str(work / "metrics.jsonl"),
            "--timeout-s", "60", "--out", str(work / "result.json")]


def start(cmd: list[str], work: Path) -> subprocess.Popen:
    log = open(work / "job.log", "a")  # noqa: SIM115 - closed with the process by `finish`
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, timeout_s: float) -> int:
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def manifest_step(work: Path) -> int | None:
    """Epoch of the checkpoint switched in now (None: none yet)."""
    try:
        return json.loads((work / "ck" / "latest.json").read_text())["epoch"]
    except (OSError, ValueError, KeyError):
        return None


def last_logged_epoch(work: Path) -> int | None:
    """The last epoch rank 0 finished (its metrics log)."""
    try:
        lines = (work / "metrics.jsonl").read_text().splitlines()
        return json.loads(lines[-1])["epoch"] if lines else None
    except (OSError, ValueError, KeyError):
        return None


def rank_pids(agent_pid: int) -> dict[int, int]:
    """RANK -> pid of the worker processes that torchrun ``agent_pid`` started (read from /proc)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid != agent_pid:
                continue
            env = dict(kv.split("=", 1) for kv in (entry / "environ").read_text().split("\0") if "=" in kv)
        except (OSError, ValueError, IndexError):
            continue  # exited meanwhile, or not ours to read
        if "RANK" in env:
            out[int(env["RANK"])] = int(entry.name)
    return out


def checkpoint_times(proc: subprocess.Popen, work: Path, timeout_s: float) -> list[tuple[float, int]]:
    """(seconds since start, epoch) of every checkpoint switch of a running job, polled until it exits."""
    t0, seen, times = time.monotonic(), None, []
    while proc.poll() is None and time.monotonic() - t0 < timeout_s:
        step = manifest_step(work)
        if step is not None and step != seen:
            seen = step
            times.append((time.monotonic() - t0, step))
        time.sleep(POLL_S)
    return times


def summary(result: dict) -> dict:
    return {"history": [[h[k] for k in METRICS] for h in result["history"]], **{k: result[k] for k in BEST}}


def compare(got: dict, want: dict) -> list[str]:
    """What differs between two run summaries ([] when bitwise equal)."""
    diffs = [f"{k}: {got[k]} != {want[k]}" for k in BEST if got[k] != want[k]]
    if len(got["history"]) != len(want["history"]):
        diffs.append(f"{len(got['history'])} epochs != {len(want['history'])}")
    diffs += [f"epoch {w[0]}: {g} != {w}" for g, w in zip(got["history"], want["history"], strict=False) if g != w]
    return diffs


def reference(args: argparse.Namespace) -> tuple[dict, list[tuple[float, int]]]:
    """The uninterrupted job's summary and the (time, epoch) of its checkpoint switches."""
    with tempfile.TemporaryDirectory(prefix="fault_ref_") as tmp:
        work = Path(tmp)
        proc = start(job_command(args, work), work)
        times = checkpoint_times(proc, work, args.job_timeout_s)
        if finish(proc, args.job_timeout_s) != 0:
            raise SystemExit(f"error: the reference job failed:\n{(work / 'job.log').read_text()[-3000:]}")
        if len(times) < 2:
            raise UsageError(f"the reference switched in {len(times)} checkpoints; raise --epochs or lower "
                             "--checkpoint-every so that a kill can fall between two")
        return summary(json.loads((work / "result.json").read_text())), times


def faulted_run(args: argparse.Namespace, rng: random.Random, window_s: float, ref: dict) -> dict:
    """One kill -9 at a random moment after the first checkpoint, then a resume; compared with ``ref``."""
    victim, delay = rng.randrange(2), rng.uniform(0.0, window_s)
    with tempfile.TemporaryDirectory(prefix="fault_run_") as tmp:
        work = Path(tmp)
        cmd = job_command(args, work)
        proc = start(cmd, work)
        t0 = time.monotonic()
        while manifest_step(work) is None and proc.poll() is None and time.monotonic() - t0 < args.job_timeout_s:
            time.sleep(POLL_S)
        time.sleep(delay)
        at = {"checkpoint_epoch": manifest_step(work), "logged_epoch": last_logged_epoch(work)}
        pid = rank_pids(proc.pid).get(victim)
        killed = pid is not None and proc.poll() is None
        if killed:
            os.kill(pid, signal.SIGKILL)
        first_rc = finish(proc, args.job_timeout_s)
        resume_rc = finish(start(cmd, work), args.job_timeout_s)
        log = (work / "job.log").read_text(errors="replace")
        resumed = re.findall(r"resumed from \S+ at epoch (\d+)", log)
        run = {"rank": victim, "delay_s": round(delay, 4), "killed": killed, "first_exit": first_rc,
               "resume_exit": resume_rc, **at, "resumed_at_epoch": int(resumed[-1]) if resumed else None}
        if resume_rc != 0:
            return {**run, "equal": False, "diffs": [f"resume failed: {log[-2000:]}"]}
        diffs = compare(summary(json.loads((work / "result.json").read_text())), ref)
        return {**run, "equal": not diffs, "diffs": diffs[:5]}


def table(runs: list[dict]) -> str:
    head = f"{'run':>3} {'rank':>4} {'delay s':>8} {'ckpt ep':>7} {'logged ep':>9} {'resumed at':>10} {'equal':>5}"
    rows = [f"{i:>3} {r['rank']:>4} {r['delay_s']:>8.3f} {r['checkpoint_epoch']!s:>7} {r['logged_epoch']!s:>9} "
            f"{r['resumed_at_epoch']!s:>10} {r['equal']!s:>5}" + ("" if r["killed"] else "  (finished before the kill)")
            for i, r in enumerate(runs)]
    return "\n".join([head, *rows])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not Path("/proc/self/environ").exists():
        raise UsageError("fault_injection.py finds the worker ranks through /proc (Linux only)")
    ref, times = reference(args)
    window_s = times[-1][0] - times[0][0]
    print(f"reference: {len(ref['history'])} epochs, checkpoints at epochs {[e for _, e in times]}, kill window "
          f"{window_s:.2f} s after the first", flush=True)
    rng = random.Random(args.seed)
    runs = []
    for i in range(args.runs):
        runs.append(faulted_run(args, rng, window_s, ref))
        r = runs[-1]
        print(f"[{i + 1}/{args.runs}] rank {r['rank']} killed {r['delay_s']:.3f} s after the first checkpoint "
              f"(checkpoint epoch {r['checkpoint_epoch']}, epoch {r['logged_epoch']} logged): "
              f"{'equal' if r['equal'] else 'DIFFERENT ' + '; '.join(r['diffs'])}", flush=True)
    payload = {"machine": machine(), "settings": vars(args), "runs": len(runs),
               "killed": sum(r["killed"] for r in runs), "equal": sum(r["equal"] for r in runs),
               "reference": {"epochs": len(ref["history"]), **{k: ref[k] for k in BEST},
                             "checkpoints": [{"t_s": round(t, 3), "epoch": e} for t, e in times]},
               "per_run": runs}
    path = save_results("fault_injection", payload)
    print(table(runs))
    print(f"{payload['equal']} of {len(runs)} resumed runs equal the uninterrupted run ({payload['killed']} killed "
          f"mid-run) -> {path}")
    return 0 if payload["equal"] == len(runs) else 1


def render(res: dict) -> list[str]:
    st = res.get("settings", {})
    runs = res.get("per_run", [])
    lines = ["## Fault injection: kill -9 of a rank, then `--resume`, against the uninterrupted run", "",
             f"File: `benchmarks/results/fault_injection.json`, `python benchmarks/fault_injection.py --runs "
             f"{res.get('runs')}`. {st.get('dataset')}, 2 ranks, exchange {st.get('exchange')}, {st.get('epochs')} "
             f"epochs, a checkpoint every {st.get('checkpoint_every')}; each run is killed (SIGKILL, random rank, "
             "random moment between the first and the last checkpoint), resumed, and compared with the "
             "uninterrupted run: every epoch's loss, accuracies and bytes, and the best record.", "",
             f"**{res.get('equal')} of {res.get('runs')} resumed runs ended equal to the uninterrupted run** "
             f"({res.get('killed')} of them were killed mid-run; the others had finished before the kill).", "",
             *table_head("run", "killed rank", "kill after (s)", "last logged epoch", "checkpoint epoch", "resumed at",
                         "equal")]
    for i, r in enumerate(runs):
        lines.append(f"| {i} | {r['rank']} | {r['delay_s']:.2f} | {r['logged_epoch']} | {r['checkpoint_epoch']} | "
                     f"{r['resumed_at_epoch']} | {'yes' if r['equal'] else 'NO: ' + ', '.join(r['diffs'][:3])} |")
    return lines + [""]


if __name__ == "__main__":
    sys.exit(main())
