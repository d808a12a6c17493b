"""Epoch time of distributed full-graph training per halo codec, split into compute / communication / waiting.

    python benchmarks/dist_time.py [--scale 17] [--hidden 64] [--ranks 2,4] [--codecs fp32,int8,int1,int1-2c] \\
        [--epochs 3] [--bandwidth-gbit 1.0] [--links loopback,shaped,emulated]

Each ``--ranks`` value is one spawn (~5 min at scale 17 on the loaded 2-core machine): run ``--ranks 2`` and
``--ranks 4`` separately; rows of other rank counts already in the JSON (same graph and width) are kept.

Graph: R-MAT (`gnn.data.synthetic.powerlaw_graph`, 2^scale nodes, >= 2M directed edges at scale 17), METIS
partitions, a 2-layer GCN (dropout 0.5), synchronous exchange. Per (ranks, codec, link) it times ``--epochs``
training epochs after one warm-up epoch (which also moves the layer-0 input once) and reports medians:

* ``epoch_s``: max over ranks of the epoch wall time (every epoch starts after a barrier);
* ``comm_s``: time inside the collectives (halo ``all_to_all_single`` and the gradient ``all_reduce``) of the rank
  that spends least there: the last rank to arrive hardly waits, so this is the transfer itself;
* ``wait_s``: max over ranks of (its collective time - ``comm_s``): blocked on slower peers (load imbalance);
* ``codec_s``: max over ranks of encode + decode time; ``compute_s``: max over ranks of the rest.

Links (``--links``):

* ``loopback``: gloo over 127.0.0.1, no limit;
* ``shaped``: a real network of ``--bandwidth-gbit`` (`distributed.shaped_network.ShapedNetwork`): one network
  namespace per rank, veth pairs to a bridge, tc ``tbf`` on both ends of every rank's link (a full-duplex NIC per
  rank). Needs root with CAP_NET_ADMIN; elsewhere the script stops with that message (drop ``shaped`` from
  ``--links``);
* ``emulated``: loopback, and every collective is followed by a sleep of (bytes this rank sends or receives,
  whichever is larger) / bandwidth (ring all_reduce: 2 (P-1)/P of the buffer). No latency, no TCP; a cross-check
  of the shaped link.

Runs with more ranks than cores are marked ``oversubscribed`` (their compute times are inflated).
Writes benchmarks/results/dist_time.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from benchmarks._common import load_results, machine, save_results, table_head

CODECS = ("fp32", "int8", "int1", "int1-2c")
LINKS = ("loopback", "shaped", "emulated")


class Clock:
    """Per-process totals of collective and codec seconds; the wrappers below add to it."""

    comm = 0.0
    codec = 0.0
    bandwidth = 0.0  # bytes/s of the emulated link; 0 = unlimited


def _instrument() -> None:
    """Wrap the collectives and codecs the halo exchange calls (module attributes, so the wrappers are seen)."""
    import torch.distributed as dist

    from distributed import codecs

    a2a, all_reduce, enc, dec = dist.all_to_all_single, dist.all_reduce, codecs.encode, codecs.decode

    def timed_a2a(output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):
        t = time.perf_counter()
        work = a2a(output, input, output_split_sizes, input_split_sizes, group=group, async_op=async_op)
        if Clock.bandwidth:
            time.sleep(max(input.numel(), output.numel()) / Clock.bandwidth)  # uint8 payloads: bytes
        Clock.comm += time.perf_counter() - t
        return work

    def timed_all_reduce(tensor, *args, **kwargs):
        if tensor.numel() < 64:  # run statistics, not training traffic
            return all_reduce(tensor, *args, **kwargs)
        t = time.perf_counter()
        work = all_reduce(tensor, *args, **kwargs)
        if Clock.bandwidth:
            p = dist.get_world_size()
            time.sleep(2 * (p - 1) / p * tensor.numel() * tensor.element_size() / Clock.bandwidth)
        Clock.comm += time.perf_counter() - t
        return work

    def timed(fn):
        def inner(*args, **kwargs):
            t = time.perf_counter()
            out = fn(*args, **kwargs)
            Clock.codec += time.perf_counter() - t
            return out
        return inner

    dist.all_to_all_single, dist.all_reduce = timed_a2a, timed_all_reduce
    codecs.encode, codecs.decode = timed(enc), timed(dec)


def worker(scale: int, hidden: int, codec_list: list[str], links: list[tuple[str, float]], epochs: int) -> list[dict]:
    """One rank: every (link, codec) run; ``links`` = (label, emulated bytes/s or 0 for none). Returns per-epoch
    (epoch, comm, codec) seconds of this rank."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

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
    for link, bandwidth in links:
        for codec in codec_list:
            torch.manual_seed(0)
            model = parallelize_gnn(GNN(ModelConfig(arch="gcn", in_dim=d.x.size(1), out_dim=g.num_classes,
                                                    hidden_dim=hidden, num_layers=2, dropout=0.5)), part,
                                    ParallelConfig(exchange=ExchangeConfig(codec=codec)),
                                    group=dist.new_group(backend="gloo"))
            opt = torch.optim.Adam(model.parameters(), lr=0.01)
            Clock.bandwidth = bandwidth
            dist.barrier()
            t0 = time.perf_counter()
            model.exchange_input(x_own)  # the one-time layer-0 input exchange, timed on its own
            out.append({"link": link, "codec": codec, "setup_s": time.perf_counter() - t0,
                        "setup_bytes": sum(b for (_, _, kind), b in model.counter.bytes.items() if kind == "setup"),
                        "input_codec": model.input_codec})
            for epoch in range(epochs + 1):
                model.set_epoch(epoch)
                dist.barrier()
                Clock.comm = Clock.codec = 0.0
                t0 = time.perf_counter()
                opt.zero_grad()
                loss = F.cross_entropy(model(x_own, part.edge_index)[train], y_own[train], reduction="sum")
                (loss / split.train.numel()).backward()
                opt.step()
                if epoch > 0:  # epoch 0: warm-up
                    out.append({"link": link, "codec": codec, "epoch": epoch,
                                "epoch_s": time.perf_counter() - t0, "comm_s": Clock.comm,
                                "codec_s": Clock.codec,
                                "bytes": model.counter.epoch_bytes(epoch)})
            Clock.bandwidth = 0.0
    if rank == 0:
        out.append({"graph": {"name": g.name, "num_nodes": d.num_nodes, "num_edges": int(d.edge_index.size(1)),
                              "num_features": int(d.x.size(1))}})
    return out


def summarise(per_rank: list[list[dict]], world: int, cores: int) -> list[dict]:
    rows = []
    keys = list(dict.fromkeys((r["link"], r["codec"]) for r in per_rank[0] if "codec" in r))  # run order
    for link, codec in keys:
        recs = [[r for r in rr if r.get("codec") == codec and r.get("link") == link and "epoch" in r]
                for rr in per_rank]
        setup = [next(r for r in rr if r.get("codec") == codec and r.get("link") == link and "setup_s" in r)
                 for rr in per_rank]
        per_epoch = []
        for e in range(len(recs[0])):
            ranks = [rr[e] for rr in recs]
            comm = min(r["comm_s"] for r in ranks)
            per_epoch.append({"epoch_s": max(r["epoch_s"] for r in ranks), "comm_s": comm,
                              "wait_s": max(r["comm_s"] - comm for r in ranks),
                              "codec_s": max(r["codec_s"] for r in ranks),
                              "compute_s": max(r["epoch_s"] - r["comm_s"] - r["codec_s"] for r in ranks),
                              "bytes": sum(r["bytes"] for r in ranks)})
        row = {k: statistics.median(p[k] for p in per_epoch) for k in per_epoch[0]}
        row.update(setup_s=max(r["setup_s"] for r in setup), setup_bytes=sum(r["setup_bytes"] for r in setup),
                   input_codec=setup[0]["input_codec"])
        row.update(ranks=world, codec=codec, link=link,
                   oversubscribed=world > cores, epochs_timed=len(per_epoch),
                   epoch_s_all=[round(p["epoch_s"], 4) for p in per_epoch])
        rows.append(row)
    return rows


def speedups(rows: list[dict]) -> dict[str, dict[str, float]]:
    """fp32 / codec ratios of the epoch time and of the communication time, per (ranks, link, codec)."""
    out = {}
    for r in rows:
        ref = next((x for x in rows if x["codec"] == "fp32" and x["ranks"] == r["ranks"] and x["link"] == r["link"]),
                   None)
        if r["codec"] != "fp32" and ref is not None:
            out[f"{r['ranks']} ranks, {r['link']}, {r['codec']}"] = {
                "epoch": ref["epoch_s"] / r["epoch_s"], "comm": ref["comm_s"] / max(r["comm_s"], 1e-9)}
    return out


def main() -> None:
    from distributed.launch import spawn
    from distributed.shaped_network import ShapedNetwork, shaped_network_available

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=int, default=17, help="R-MAT scale: 2^scale nodes, 16 2^scale sampled edges")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--ranks", default="2", help="comma list of world sizes, e.g. 2,4")
    p.add_argument("--codecs", default=",".join(CODECS))
    p.add_argument("--epochs", type=int, default=2, help="timed epochs per run (after one warm-up epoch)")
    p.add_argument("--bandwidth-gbit", type=float, default=1.0, help="rate of the shaped and emulated links")
    p.add_argument("--links", default=",".join(LINKS), help=f"comma list of: {', '.join(LINKS)}")
    args = p.parse_args()
    codec_list, link_list = args.codecs.split(","), args.links.split(",")
    for what, chosen, valid in (("codecs", codec_list, CODECS), ("links", link_list, LINKS)):
        if set(chosen) - set(valid):
            raise SystemExit(f"unknown {what} {sorted(set(chosen) - set(valid))}; valid: {', '.join(valid)}")
    if args.bandwidth_gbit <= 0 and set(link_list) & {"shaped", "emulated"}:
        raise SystemExit("--bandwidth-gbit must be > 0 for the shaped and emulated links")
    if "shaped" in link_list:
        ok, why = shaped_network_available()
        if not ok:
            raise SystemExit(f"the shaped link is not available here: {why}. Rerun with --links loopback,emulated")
    rate = args.bandwidth_gbit
    in_process = [(label, bw) for name, label, bw in (("loopback", "loopback", 0.0),
                                                      ("emulated", f"{rate:g} Gbit/s emulated", rate * 1e9 / 8))
                  if name in link_list]
    cores = os.cpu_count() or 1
    start, rows, graph = time.perf_counter(), [], None
    load_start = os.getloadavg()[0]
    worlds = [int(r) for r in args.ranks.split(",")]
    shaped_label = ""
    for world in worlds:
        runs = []  # (per-rank results, wall seconds)
        if in_process:
            t = time.perf_counter()
            runs.append((spawn(worker, world, args.scale, args.hidden, codec_list, in_process, args.epochs),
                         time.perf_counter() - t))
        if "shaped" in link_list:
            t = time.perf_counter()
            with ShapedNetwork(world, rate) as net:
                shaped_label = net.describe()
                runs.append((spawn(worker, world, args.scale, args.hidden, codec_list,
                                   [(f"{rate:g} Gbit/s shaped", 0.0)], args.epochs,
                                   rank_setup=net.rank_setup, master_addr=net.address(0)), time.perf_counter() - t))
        for per_rank, wall_s in runs:
            graph = next(r["graph"] for r in per_rank[0] if "graph" in r)
            rows += [{**r, "run_wall_s": wall_s} for r in summarise(per_rank, world, cores)]
    old = load_results("dist_time")  # runs of other rank counts on the same graph and model are kept
    if old.get("graph") == graph and old.get("hidden") == args.hidden:
        rows = [r for r in old.get("rows", []) if r["ranks"] not in worlds] + rows
    for r in rows:
        print(f"{r['ranks']} ranks{' (oversubscribed)' if r['oversubscribed'] else ''} {r['link']:22s} "
              f"{r['codec']:8s} epoch {r['epoch_s']:.3f} s; compute {r['compute_s']:.3f}, comm {r['comm_s']:.3f}, "
              f"wait {r['wait_s']:.3f}, codec {r['codec_s']:.3f} (max over ranks each)  {r['bytes'] / 1e6:.1f} MB"
              + (f"; setup {r['setup_s']:.3f} s, {r['setup_bytes'] / 1e6:.2f} MB ({r['input_codec']})"
                 if "setup_s" in r else ""))
    speedup = speedups(rows)
    for k, v in speedup.items():
        print(f"vs fp32, {k}: epoch {v['epoch']:.2f}x, communication {v['comm']:.2f}x")
    payload = {"graph": graph, "hidden": args.hidden,
               "model": f"gcn 2 layers hidden {args.hidden} dropout 0.5, synchronous exchange",
               "rows": rows, "speedup_vs_fp32": speedup, "wall_s": time.perf_counter() - start,
               "machine": machine(), "cores": cores,
               "links": {"shaped": shaped_label or None,
                         "emulated": "loopback + sleep(max(bytes sent, bytes received) / bandwidth) after every "
                                     "collective (ring all_reduce: 2(P-1)/P of the buffer); not a real network"},
               "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]},
               "note": f"{cores} cores; 1-minute load average {load_start:.1f} at the start and "
                       f"{os.getloadavg()[0]:.1f} at the end (this job's own ranks included): other jobs inflate "
                       "compute and wait times; ranks > cores are marked oversubscribed",
               "command": "python benchmarks/dist_time.py " + " ".join(sys.argv[1:])}
    print(f"written {save_results('dist_time', payload)} in {payload['wall_s']:.0f} s")


def render(res: dict) -> list[str]:
    g = res.get("graph", {})
    lines = ["## Distributed training: epoch time per halo codec", "",
             f"File: `benchmarks/results/dist_time.json`. Graph {g.get('name')} ({g.get('num_nodes')} nodes, "
             f"{g.get('num_edges')} edges), {res.get('model')}. Seconds are medians over timed epochs of the max over "
             "ranks. Links: " + "; ".join(f"{k}: {v}" for k, v in res.get("links", {}).items() if v) + ".", "",
             "Setup: the one-time exchange of layer 0's input rows before the first epoch (its codec: the narrowest "
             "exact one), timed on its own.", "",
             *table_head("ranks", "link", "codec", "epoch s", "compute s", "comm s", "wait s", "codec s", "MB / epoch",
                         "epoch speedup vs fp32", "comm speedup vs fp32", "setup s (MB, codec)", "oversubscribed")]
    speed = res.get("speedup_vs_fp32", {})
    for r in res.get("rows", []):
        sp = speed.get(f"{r['ranks']} ranks, {r['link']}, {r['codec']}")
        ratios = f"{sp['epoch']:.2f} | {sp['comm']:.2f}" if sp else "- | -"
        setup = (f"{r['setup_s']:.3f} ({r['setup_bytes'] / 1e6:.2f}, {r['input_codec']})" if "setup_s" in r
                 else "- (not measured)")
        lines.append(f"| {r['ranks']} | {r['link']} | {r['codec']} | {r['epoch_s']:.3f} | {r['compute_s']:.3f} | "
                     f"{r['comm_s']:.4f} | {r['wait_s']:.3f} | {r['codec_s']:.4f} | {r['bytes'] / 1e6:.2f} | "
                     f"{ratios} | {setup} | {r['oversubscribed']} |")
    return lines + ["", f"Note: {res.get('note', '')}", ""]


if __name__ == "__main__":
    main()
