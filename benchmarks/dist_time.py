"""Epoch speedup of compressed and pipelined halo exchange against link bandwidth, on a real shaped network.

    python -m benchmarks.dist_time [--bandwidths 0.05,0.1,0.25,0.5,1,2.5] [--ranks 2] \\
        [--codecs fp32,int8,int1,int1-2c] [--modes sync,pipelined,pipelined-fresh] [--epochs 5] [--scale 17] \\
        [--hidden 64]

Graph: R-MAT (`gnn.data.synthetic.powerlaw_graph`, 2^scale nodes), METIS partitions, a 2-layer GCN (dropout 0.5).
Per bandwidth, one spawn of ``--ranks`` gloo ranks (one thread each) whose TCP traffic crosses
`distributed.shaped_network.ShapedNetwork` (a network namespace per rank, tc ``tbf`` on both ends of each rank's
link: a full-duplex NIC of that rate); ``loopback`` in ``--bandwidths`` is gloo over 127.0.0.1 (no root needed).
Per (codec, mode) it runs one warm-up epoch, then ``--epochs`` back-to-back epochs (no barrier between them: an epoch
is the time from its start to the next one's, so nothing in flight escapes the clock) and reports medians:

* ``epoch_s``: max over ranks of the epoch time;
* ``comm_s``: seconds blocked in the transport (a synchronous ``all_to_all_single``, or waiting for a pipelined
  one), of the rank blocked least: the last to arrive hardly waits, so this is the exposed transfer itself;
* ``wait_s``: max over ranks of (its blocked time - ``comm_s``): waiting for slower peers (load imbalance);
* ``codec_s``: max over ranks of encode + decode; ``compute_s``: max over ranks of the rest.

Modes: ``sync`` (fresh halos every step), ``pipelined`` (one-step-stale halos and halo gradients, the transfers
overlapped with the next step: every timed epoch is a stale one) and ``pipelined-fresh`` (stale halos, but the halo
gradients sent synchronously in every step: `ExchangeConfig.stale_gradients=False`, only the forward overlaps).
Pipelined training with a synchronous epoch every K is reported as ((K - 1) pipelined + 1 sync) / K from the two
measured rows. Right after the fp32 synchronous run, each spawn times the same training on a **free network**
(mode ``free``: every halo ``all_to_all_single`` returns at once with a zeroed receive buffer, so the ranks compute
exactly what they would, and only DDP's small gradient all-reduce crosses the link). Its epoch is the compute time:
the fp32 run gives the fraction of its epoch spent communicating, 1 - compute / epoch, and the **compute-only
bound**, fp32 epoch / compute, the speedup of a free network. Measured in the same spawn, a minute apart, the bound
does not move with the machine's speed between spawns (a shared VM's compute drifts by a third over the quarter
hour a full run takes). Older rows without a free run take the loopback fp32 run's compute (DDP's gradient
all-reduce is asynchronous, so on a slow link the rank blocked least in the halo exchange waits for its peer inside
it, untimed, and a per-link compute time would grow with the link's slowness).

Runs with more ranks than cores are marked ``oversubscribed``. Results of other (ranks, link) pairs already in the
JSON (same graph and width) are kept; every row names the command that measured it. Ratios are only taken within
one command's rows: the bound of a link uses its free run, or else the loopback run of the same command, or else the
link's own compute.
Writes benchmarks/results/dist_time.json and dist_time_speedup.png.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks._common import RESULTS, load_results, machine, save_results, table_head, table_row
from gnn.cli import UsageError

CODECS = ("fp32", "int8", "int1", "int1-2c")
MODES = ("sync", "pipelined", "pipelined-fresh")
FREE = "free"  # the compute-only reference run (fp32, no halo transfer), added after each spawn's fp32 sync run
BANDWIDTHS = "loopback,0.05,0.1,0.25,0.5,1,2.5"
AMORTIZE_K = 10  # the pipelined accuracy runs' period (benchmarks/dist_accuracy.py)
GOALS = {"comm_fraction": 0.7, "int1_speedup": 4.0, "pipelined_of_bound": 0.9}


class Clock:
    """Per-process totals of seconds blocked in collectives and in the codecs; the wrappers below add to it."""

    comm = 0.0
    codec = 0.0
    free = False  # the free network: halo all-to-alls move nothing (`FREE` runs)


class DoneWork:
    """The handle of a free network's all-to-all: already complete."""

    def wait(self, *args) -> bool:
        return True


class TimedWork:
    """An async collective's handle whose ``wait`` adds the blocked seconds to `Clock.comm`."""

    def __init__(self, work) -> None:
        self.work = work

    def wait(self, *args):
        t = time.perf_counter()
        out = self.work.wait(*args)
        Clock.comm += time.perf_counter() - t
        return out


def _instrument() -> None:
    """Wrap the collectives and codecs the halo exchange calls (module attributes, so the callers see the wrappers)."""
    import torch.distributed as dist

    from distributed import codecs

    a2a, enc, dec = dist.all_to_all_single, codecs.encode, codecs.decode

    def timed_a2a(output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):
        if Clock.free:  # nothing crosses the network; the receiver computes on zero rows of the same shape
            output.zero_()
            return DoneWork() if async_op else None
        t = time.perf_counter()
        work = a2a(output, input, output_split_sizes, input_split_sizes, group=group, async_op=async_op)
        Clock.comm += time.perf_counter() - t
        return TimedWork(work) if async_op else work

    def timed(fn):
        def inner(*args, **kwargs):
            t = time.perf_counter()
            out = fn(*args, **kwargs)
            Clock.codec += time.perf_counter() - t
            return out
        return inner

    dist.all_to_all_single = timed_a2a
    codecs.encode, codecs.decode = timed(enc), timed(dec)


def _time_epochs(model, opt, x_own, y_own, train, num_train: int, epochs: int) -> list[dict]:
    """One warm-up epoch, then ``epochs`` back-to-back ones; per timed epoch its seconds and this rank's blocked and
    codec seconds."""
    import torch.distributed as dist
    import torch.nn.functional as F

    starts, blocked, codec = [], [], []
    for epoch in range(epochs + 1):
        if epoch == 1:
            dist.barrier()  # the timed block starts together on every rank
        starts.append(time.perf_counter())
        blocked.append(Clock.comm)
        codec.append(Clock.codec)
        model.set_epoch(epoch)
        opt.zero_grad()
        loss = F.cross_entropy(model(x_own, model.part.edge_index)[train], y_own[train], reduction="sum")
        (loss / num_train).backward()
        opt.step()
    starts.append(time.perf_counter())
    blocked.append(Clock.comm)
    codec.append(Clock.codec)
    model.drain()
    return [{"epoch": e, "epoch_s": starts[e + 1] - starts[e], "comm_s": blocked[e + 1] - blocked[e],
             "codec_s": codec[e + 1] - codec[e], "bytes": model.counter.epoch_bytes(e)} for e in range(1, epochs + 1)]


def worker(scale: int, hidden: int, runs: list[tuple[str, str]], epochs: int) -> list[dict]:
    """One rank: every (codec, mode) run. Returns per-run setup records and per-epoch records of this rank."""
    import torch
    import torch.distributed as dist

    from distributed.halo import ExchangeConfig
    from distributed.parallelize import ParallelConfig, parallelize_gnn
    from distributed.partition import build_partition
    from gnn.data.partition import cached_partition_nodes
    from gnn.data.synthetic import powerlaw_graph
    from gnn.models import GNN, ModelConfig

    _instrument()
    rank, world = dist.get_rank(), dist.get_world_size()
    g = powerlaw_graph(scale, seed=0)
    d, split = g.data, g.splits[0]
    if rank == 0:
        cached_partition_nodes(g.name, d.edge_index, d.num_nodes, world, "metis", 0)
    dist.barrier()
    parts = cached_partition_nodes(g.name, d.edge_index, d.num_nodes, world, "metis", 0)
    part = build_partition(d.edge_index, parts, rank)
    x_own, y_own = d.x[part.owned].contiguous(), d.y[part.owned]
    local = torch.full((d.num_nodes,), -1, dtype=torch.long)
    local[part.owned] = torch.arange(part.num_owned)
    train = local[split.train][local[split.train] >= 0]
    out = []
    for codec, mode in runs:
        torch.manual_seed(0)
        Clock.free = mode == FREE
        model = parallelize_gnn(GNN(ModelConfig(arch="gcn", in_dim=d.x.size(1), out_dim=g.num_classes,
                                                hidden_dim=hidden, num_layers=2, dropout=0.5)), part,
                                ParallelConfig(exchange=ExchangeConfig(codec=codec,
                                                                       pipeline=mode not in ("sync", FREE),
                                                                       stale_gradients=mode != "pipelined-fresh")),
                                group=dist.new_group(backend="gloo"))
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        dist.barrier()
        t0 = time.perf_counter()
        model.exchange_input(x_own)  # the one-time layer-0 input exchange, timed on its own
        setup_s = time.perf_counter() - t0
        out.append({"codec": codec, "mode": mode, "setup_s": setup_s, "input_codec": model.input_codec,
                    "setup_bytes": sum(b for (_, _, kind), b in model.counter.bytes.items() if kind == "setup")})
        out += [{"codec": codec, "mode": mode, **r}
                for r in _time_epochs(model, opt, x_own, y_own, train, split.train.numel(), epochs)]
        dist.barrier(group=model.group)
        dist.destroy_process_group(model.group)
        Clock.free = False
    if rank == 0:
        out.append({"graph": {"name": g.name, "num_nodes": d.num_nodes, "num_edges": int(d.edge_index.size(1)),
                              "num_features": int(d.x.size(1))}})
    return out


def summarise(per_rank: list[list[dict]], world: int, cores: int, link: str, gbit: float | None) -> list[dict]:
    """Rows per (codec, mode): medians over epochs of the cross-rank aggregates (see the module docstring)."""
    rows = []
    for codec, mode in dict.fromkeys((r["codec"], r["mode"]) for r in per_rank[0] if "codec" in r):
        mine = [[r for r in rr if r.get("codec") == codec and r.get("mode") == mode] for rr in per_rank]
        setup = [next(r for r in rr if "setup_s" in r) for rr in mine]
        epochs = [[r for r in rr if "epoch" in r] for rr in mine]
        per_epoch = []
        for e in range(len(epochs[0])):
            ranks = [rr[e] for rr in epochs]
            comm = min(r["comm_s"] for r in ranks)
            per_epoch.append({"epoch_s": max(r["epoch_s"] for r in ranks), "comm_s": comm,
                              "wait_s": max(r["comm_s"] - comm for r in ranks),
                              "codec_s": max(r["codec_s"] for r in ranks),
                              "compute_s": max(r["epoch_s"] - r["comm_s"] - r["codec_s"] for r in ranks),
                              "bytes": sum(r["bytes"] for r in ranks)})
        row = {k: statistics.median(p[k] for p in per_epoch) for k in per_epoch[0]}
        all_s = [p["epoch_s"] for p in per_epoch]
        row.update(ranks=world, link=link, gbit=gbit, codec=codec, mode=mode, oversubscribed=world > cores,
                   epochs_timed=len(per_epoch), epoch_s_all=[round(s, 4) for s in all_s],
                   spread=(max(all_s) - min(all_s)) / row["epoch_s"],
                   setup_s=max(r["setup_s"] for r in setup), setup_bytes=sum(r["setup_bytes"] for r in setup),
                   input_codec=setup[0]["input_codec"])
        rows.append(row)
    return rows


def bsa_sync_fraction(accuracy: dict, suffix: str = "+pipeline(BSA)") -> tuple[float, str] | None:
    """The largest fraction of synchronous epochs that Sylvie's Bounded Staleness Adaptor chose in the accuracy runs
    (`benchmarks/dist_accuracy.py`, variants ending in ``suffix``, mean over seeds), and which run it came from;
    None when none has run. The timing runs are too short for the adaptor's period to settle, so its epoch is
    amortized from the measured synchronous and pipelined rows at this fraction (the largest: the slowest)."""
    found = [(statistics.mean(v["synchronous_epochs"]) / entry["epochs"], f"{name} {variant}")
             for name, entry in accuracy.get("datasets", {}).items()
             for variant, v in entry.get("variants", {}).items()
             if variant.endswith(suffix) and all(c is not None for c in v.get("synchronous_epochs", [None]))]
    return max(found, default=None)


def derive(rows: list[dict], bsa: tuple[float, str] | None = None,
           bsa_fresh: tuple[float, str] | None = None) -> list[dict]:
    """Per (ranks, link) with an fp32 synchronous row: its communication fraction, the compute-only bound, and every
    variant's epoch speedup (also as a fraction of the bound), pipelined-with-sync-every-K amortized included, and
    pipelined with the Bounded Staleness Adaptor at ``bsa``'s synchronous fraction (`bsa_sync_fraction`), and
    pipelined-fresh with it at ``bsa_fresh``'s (the fresh-gradient accuracy runs' own fraction).

    The bound's compute time is the epoch of the same spawn's free-network run (`FREE`) where there is one, else the
    loopback fp32 run's compute (same rank count and command): on a slow link the rank that is blocked least in the
    halo all-to-all waits instead inside DDP's gradient all-reduce (C++, not timed), which a per-link compute time
    would count as compute."""
    out = []
    loopback = {(r["ranks"], r.get("command")): r["compute_s"] for r in rows
                if r["link"] == "loopback" and r["codec"] == "fp32" and r["mode"] == "sync"}
    free = {(r["ranks"], r["link"], r.get("command")): r["epoch_s"] for r in rows if r["mode"] == FREE}
    for ref in (r for r in rows if r["codec"] == "fp32" and r["mode"] == "sync"):
        same = [r for r in rows if (r["ranks"], r["link"]) == (ref["ranks"], ref["link"]) and r["mode"] != FREE]
        key = (ref["ranks"], ref.get("command"))
        free_key = (ref["ranks"], ref["link"], ref.get("command"))
        compute = free.get(free_key, loopback.get(key, ref["compute_s"]))
        compute_from = ("free network, same spawn" if free_key in free else
                        "loopback fp32" if key in loopback else "this link")
        bound = ref["epoch_s"] / compute
        variants = {f"{r['codec']} {r['mode']}": r["epoch_s"] for r in same}
        for codec in dict.fromkeys(r["codec"] for r in same):
            if f"{codec} sync" in variants and f"{codec} pipelined" in variants:
                sync, piped = variants[f"{codec} sync"], variants[f"{codec} pipelined"]
                variants[f"{codec} pipelined K={AMORTIZE_K}"] = ((AMORTIZE_K - 1) * piped + sync) / AMORTIZE_K
                if bsa is not None:
                    variants[f"{codec} pipelined BSA"] = bsa[0] * sync + (1 - bsa[0]) * piped
            if bsa_fresh is not None and f"{codec} sync" in variants and f"{codec} pipelined-fresh" in variants:
                fresh, frac = variants[f"{codec} pipelined-fresh"], bsa_fresh[0]
                variants[f"{codec} pipelined-fresh BSA"] = frac * variants[f"{codec} sync"] + (1 - frac) * fresh
        speedup = {name: ref["epoch_s"] / s for name, s in variants.items()}
        out.append({"ranks": ref["ranks"], "link": ref["link"], "gbit": ref["gbit"],
                    "oversubscribed": ref["oversubscribed"], "fp32_comm_fraction": 1 - compute / ref["epoch_s"],
                    "compute_s": compute, "compute_from": compute_from,
                    "compute_only_bound": bound, "speedup": speedup,
                    "of_bound": {name: s / bound for name, s in speedup.items()},
                    "bsa_sync_fraction": bsa[0] if bsa else None, "bsa_sync_fraction_from": bsa[1] if bsa else None,
                    "bsa_fresh_sync_fraction": bsa_fresh[0] if bsa_fresh else None,
                    "bsa_fresh_sync_fraction_from": bsa_fresh[1] if bsa_fresh else None})
    return sorted(out, key=lambda d: (d["ranks"], d["gbit"] if d["gbit"] is not None else float("inf")))


def goals(derived: list[dict]) -> list[dict]:
    """The issue's goals where fp32 communication is >= 70 % of its epoch: int1 >= 4x, pipelined int1 >= 90 % of the
    compute-only bound."""
    out = []
    for d in derived:
        if d["fp32_comm_fraction"] >= GOALS["comm_fraction"] and "int1 sync" in d["speedup"]:
            piped, bsa = d["of_bound"].get("int1 pipelined"), d["of_bound"].get("int1 pipelined BSA")
            fresh = d["of_bound"].get("int1 pipelined-fresh BSA")
            out.append({"ranks": d["ranks"], "link": d["link"], "int1_speedup": d["speedup"]["int1 sync"],
                        "int1_ok": d["speedup"]["int1 sync"] >= GOALS["int1_speedup"],
                        "bound": d["compute_only_bound"],  # below 4x, no codec can reach the int1 goal
                        "pipelined_int1_of_bound": piped,
                        "pipelined_ok": piped is not None and piped >= GOALS["pipelined_of_bound"],
                        "pipelined_bsa_int1_of_bound": bsa,
                        "pipelined_bsa_ok": bsa is not None and bsa >= GOALS["pipelined_of_bound"],
                        "pipelined_fresh_bsa_int1_of_bound": fresh,
                        "pipelined_fresh_bsa_ok": fresh is not None and fresh >= GOALS["pipelined_of_bound"]})
    return out


def plot(derived: list[dict], path: Path) -> str | None:
    """Epoch speedup against bandwidth (log x), one panel per rank count, the compute-only bound dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shaped = [d for d in derived if d["gbit"] is not None]
    worlds = sorted({d["ranks"] for d in shaped})
    if not worlds:
        return None
    fig, axes = plt.subplots(1, len(worlds), figsize=(6.5 * len(worlds), 4.5), squeeze=False)
    for ax, world in zip(axes[0], worlds, strict=True):
        ds = sorted((d for d in shaped if d["ranks"] == world), key=lambda d: d["gbit"])
        x = [d["gbit"] for d in ds]
        ax.plot(x, [d["compute_only_bound"] for d in ds], "k--", lw=2, label="compute-only bound")
        for i, codec in enumerate(CODECS):  # a colour per codec; solid pipelined, dotted with fresh gradients
            for mode, style, marker in (("sync", "-.", "s"), ("pipelined", "-", "o"), ("pipelined-fresh", ":", "^")):
                name = f"{codec} {mode}"
                pts = [(d["gbit"], d["speedup"][name]) for d in ds if name in d["speedup"]]
                if pts and name != "fp32 sync":
                    ax.plot(*zip(*pts, strict=True), ls=style, marker=marker, color=f"C{i}", label=name)
        ax.set_xscale("log")
        ax.set_xlabel("link bandwidth per rank (Gbit/s, tc-shaped)")
        ax.set_ylabel("epoch speedup vs fp32 synchronous")
        over = " (oversubscribed)" if ds[0]["oversubscribed"] else ""
        ax.set_title(f"{world} ranks{over}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def _parse_bandwidths(text: str) -> list[float | None]:
    out = []
    for tok in text.split(","):
        if tok == "loopback":
            out.append(None)
            continue
        try:
            gbit = float(tok)
        except ValueError:
            raise UsageError(f"--bandwidths: {tok!r} is neither a rate in Gbit/s nor 'loopback'") from None
        if not gbit > 0:
            raise UsageError(f"--bandwidths: {tok}; a link rate must be > 0 Gbit/s")
        out.append(gbit)
    return out


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bandwidths", default=BANDWIDTHS, help="comma list of Gbit/s per rank, or 'loopback'")
    p.add_argument("--ranks", default="2", help="comma list of world sizes, e.g. 2,4")
    p.add_argument("--codecs", default=",".join(CODECS))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--epochs", type=int, default=5, help="timed epochs per run (after one warm-up epoch)")
    p.add_argument("--scale", type=int, default=17, help="R-MAT scale: 2^scale nodes")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--derive-only", action="store_true",
                   help="time nothing: recompute the speedups, goals, plot and table from the stored rows (e.g. after "
                        "new Bounded Staleness Adaptor accuracy runs changed its synchronous fraction)")
    args = p.parse_args()
    if args.derive_only:
        timing = ["--" + dest for dest in ("bandwidths", "ranks", "codecs", "modes", "epochs", "scale", "hidden")
                  if getattr(args, dest) != p.get_default(dest)]
        if timing:
            p.error(f"--derive-only times nothing, so {', '.join(timing)} would be ignored; drop them")
    for what, chosen, valid in (("codecs", args.codecs.split(","), CODECS), ("modes", args.modes.split(","), MODES)):
        if set(chosen) - set(valid):
            raise UsageError(f"unknown {what} {sorted(set(chosen) - set(valid))}; valid: {', '.join(valid)}")
    if args.epochs < 1:
        raise UsageError("--epochs must be >= 1")
    return args


def main() -> None:
    from distributed.launch import spawn
    from distributed.shaped_network import ShapedNetwork, shaped_network_available

    args = _args()
    if args.derive_only:
        rederive()
        return
    bandwidths = _parse_bandwidths(args.bandwidths)
    if any(b is not None for b in bandwidths):
        ok, why = shaped_network_available()
        if not ok:
            raise UsageError(f"the shaped network is not available here: {why}. Rerun with --bandwidths loopback")
    runs = [(c, m) for c in args.codecs.split(",") for m in args.modes.split(",")]
    if ("fp32", "sync") in runs:  # the compute-only reference, timed right after the run it bounds
        runs.insert(runs.index(("fp32", "sync")) + 1, ("fp32", FREE))
    cores, start, load_start = os.cpu_count() or 1, time.perf_counter(), os.getloadavg()[0]
    rows, graph, done, links = [], None, set(), {}
    for world in [int(r) for r in args.ranks.split(",")]:
        for gbit in bandwidths:
            t = time.perf_counter()
            if gbit is None:
                label = "loopback"
                links["loopback"] = "gloo over 127.0.0.1, no limit"
                per_rank = spawn(worker, world, args.scale, args.hidden, runs, args.epochs)
            else:
                label = f"{gbit:g} Gbit/s shaped"
                with ShapedNetwork(world, gbit) as net:
                    links["shaped"] = net.describe().replace(f"{gbit:g} Gbit/s ", "")
                    per_rank = spawn(worker, world, args.scale, args.hidden, runs, args.epochs,
                                     rank_setup=net.rank_setup, master_addr=net.address(0))
            graph = next(r["graph"] for r in per_rank[0] if "graph" in r)
            new = summarise(per_rank, world, cores, label, gbit)
            rows += [{**r, "run_wall_s": time.perf_counter() - t} for r in new]
            done.add((world, label))
            print(f"{world} ranks, {label}: " + ", ".join(f"{r['codec']} {r['mode']} {r['epoch_s']:.3f} s"
                                                           for r in new), flush=True)
    command = "python -m benchmarks.dist_time " + " ".join(sys.argv[1:])
    rows = [{**r, "command": command} for r in rows]
    old = load_results("dist_time")  # other (ranks, link) pairs on the same graph and model are kept
    if old.get("graph") == graph and old.get("hidden") == args.hidden and "derived" in old:
        kept = [{"command": old.get("command"), **r} for r in old["rows"] if (r["ranks"], r["link"]) not in done]
        rows, links = kept + rows, {**old.get("links", {}), **links}
    load_end = os.getloadavg()[0]
    payload = {"graph": graph, "hidden": args.hidden, "model": f"gcn 2 layers hidden {args.hidden} dropout 0.5",
               "rows": rows, **derived_fields(rows), "goal_thresholds": GOALS, "links": links,
               "wall_s": time.perf_counter() - start, "machine": machine(), "cores": cores,
               "load_average_1min": {"start": load_start, "end": load_end},
               "note": f"{cores} cores, one torch thread per rank; 1-minute load average {load_start:.1f} at the start "
                       f"and {load_end:.1f} at the end (this job's own ranks included). 'spread' is (slowest - fastest "
                       "epoch) / median per row: the noise of that row's median.",
               "command": command}
    print("\n".join(render(payload)))
    print(f"written {save_results('dist_time', payload)} in {payload['wall_s']:.0f} s")


def derived_fields(rows: list[dict]) -> dict:
    """What the results file derives from its timed rows: speedups (BSA at the accuracy runs' synchronous
    fraction), goals and the plot's file name (the plot is written)."""
    accuracy = load_results("dist_accuracy")
    derived = derive(rows, bsa_sync_fraction(accuracy), bsa_sync_fraction(accuracy, "+pipeline(BSA)+fresh-grad"))
    return {"derived": derived, "goals": goals(derived), "plot": plot(derived, RESULTS / "dist_time_speedup.png")}


def rederive() -> None:
    """Recompute the derived speedups, goals and plot of the stored timing rows (no timing run)."""
    res = load_results("dist_time")
    if not res.get("rows"):
        print("error: --derive-only: benchmarks/results/dist_time.json has no timed rows; run "
              "python -m benchmarks.dist_time first", file=sys.stderr)
        raise SystemExit(2)
    res.update(derived_fields(res["rows"]))
    print("\n".join(render(res)))
    print(f"written {save_results('dist_time', res)} (derived only)")


def _times(speedup: dict, name: str) -> str:
    return f"{speedup[name]:.2f}x" if name in speedup else "-"


def _of_bound(derived: dict, name: str) -> str:
    """'6.28x (93%)': a variant's speedup and its share of the compute-only bound; '-' where not measured."""
    s = derived["speedup"]
    return f"{s[name]:.2f}x ({derived['of_bound'][name]:.0%})" if name in s else "-"


def _goal_of_bound(goal: dict, key: str) -> str:
    """A goal row's pipelined share of the bound, met or missed (``key``: 'pipelined' or 'pipelined_bsa')."""
    share = goal.get(f"{key}_int1_of_bound")
    return "not run" if share is None else f"{share:.0%} of the bound ({'met' if goal[f'{key}_ok'] else 'missed'})"


def _bsa_source(res: dict, key: str = "bsa_sync_fraction") -> str:
    d = next((d for d in res.get("derived", []) if d.get(key) is not None), None)
    return f" ({d[key]:.1%}, {d[key + '_from']})" if d else " (none run yet)"


def _compute_sources(res: dict) -> str:
    """Where the bounds' compute times came from, e.g. 'the free-network run of the same spawn (2 ranks)'."""
    names = {"free network, same spawn": "the free-network run of the same spawn", "loopback fp32":
             "the loopback fp32 run's compute", "this link": "the link's own fp32 compute"}
    by = {}
    for d in res.get("derived", []):
        by.setdefault(d["compute_from"], set()).add(d["ranks"])
    return "; ".join(f"{names.get(k, k)} ({', '.join(map(str, sorted(v)))} ranks)" for k, v in by.items()) or "-"


def render(res: dict) -> list[str]:
    g = res.get("graph", {})
    lines = ["## Distributed training: epoch speedup against bandwidth", "",
             "File: `benchmarks/results/dist_time.json` ("
             + "; ".join(f"`{c}`" for c in dict.fromkeys(r.get("command", res.get("command"))
                                                         for r in res.get("rows", []))) + f"). Graph {g.get('name')} "
             f"({g.get('num_nodes')} nodes, {g.get('num_edges')} edges), {res.get('model')}, METIS partitions. "
             "Links: " + "; ".join(f"{k}: {v}" for k, v in res.get("links", {}).items()) + ". Speedup = fp32 "
             "synchronous epoch / the variant's epoch at the same bandwidth; bound = fp32 epoch / compute (a free "
             "network; compute: " + _compute_sources(res) + ", see the script's docstring); communication share = 1 - "
             f"compute / fp32 epoch; pipelined K={AMORTIZE_K} = 9 pipelined + 1 synchronous epochs, from the measured "
             "rows; pipelined BSA (Sylvie's Bounded Staleness Adaptor) = the same amortization at the largest "
             "synchronous fraction the adaptor chose in the accuracy runs" + _bsa_source(res) + "; pipelined-fresh: "
             "stale halos, halo gradients synchronous in every step (with BSA: at the fraction of the fresh-gradient "
             "runs" + _bsa_source(res, "bsa_fresh_sync_fraction") + ").", "",
             *table_head("ranks", "link", "fp32 comm share", "bound", "int8", "int1", "int1-2c", "fp32 pipelined",
                         "int1 pipelined (of bound)", f"int1 pipelined K={AMORTIZE_K}", "int1-2c pipelined",
                         "fp32 pipelined BSA", "int1 pipelined BSA (of bound)",
                         "int1 pipelined-fresh BSA (of bound)")]
    for d in res.get("derived", []):
        s = d["speedup"]
        over = " (oversubscribed)" if d["oversubscribed"] else ""
        lines.append(table_row(f"{d['ranks']}{over}", d["link"], f"{d['fp32_comm_fraction']:.0%}",
                               f"{d['compute_only_bound']:.2f}x", _times(s, "int8 sync"), _times(s, "int1 sync"),
                               _times(s, "int1-2c sync"), _times(s, "fp32 pipelined"), _of_bound(d, "int1 pipelined"),
                               _times(s, f"int1 pipelined K={AMORTIZE_K}"), _times(s, "int1-2c pipelined"),
                               _times(s, "fp32 pipelined BSA"), _of_bound(d, "int1 pipelined BSA"),
                               _of_bound(d, "int1 pipelined-fresh BSA")))
    goal_rows = goals(res.get("derived", []))
    if res.get("plot"):
        lines += ["", f"![epoch speedup against bandwidth](benchmarks/results/{res['plot']})"]
    lines += ["", "Goals where fp32 communication is >= 70 % of its epoch (int1 >= 4x; pipelined int1 >= 90 % of the "
              "bound): " + ("; ".join(f"{x['ranks']} ranks {x['link']}: int1 {x['int1_speedup']:.2f}x "
                                     f"({'met' if x['int1_ok'] else 'missed'}"
                                     + (f"; unreachable: the bound is {x['bound']:.2f}x" if not x["int1_ok"]
                                        and x.get("bound", math.inf) < GOALS["int1_speedup"] else "")
                                     + "), pipelined int1 " + _goal_of_bound(x, "pipelined")
                                     + ", with BSA " + _goal_of_bound(x, "pipelined_bsa")
                                     + ", with BSA and fresh gradients " + _goal_of_bound(x, "pipelined_fresh_bsa")
                                     for x in goal_rows) or "no bandwidth reached that share") + ".", "",
              "Per run (medians over the timed epochs; seconds):", "",
              *table_head("ranks", "link", "codec", "mode", "epoch", "compute", "comm (exposed)", "wait", "codec",
                          "MB / epoch", "spread", "setup s (MB, codec)")]
    for r in res.get("rows", []):
        lines.append(table_row(r["ranks"], r["link"], r["codec"], r["mode"], f"{r['epoch_s']:.3f}",
                               f"{r['compute_s']:.3f}", f"{r['comm_s']:.3f}", f"{r['wait_s']:.3f}",
                               f"{r['codec_s']:.3f}", f"{r['bytes'] / 1e6:.2f}", f"{r['spread']:.0%}",
                               f"{r['setup_s']:.2f} ({r['setup_bytes'] / 1e6:.1f}, {r['input_codec']})"))
    return lines + ["", f"Note: {res.get('note', '')}", ""]


if __name__ == "__main__":
    main()
