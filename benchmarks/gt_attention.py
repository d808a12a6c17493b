"""Attention kernels against sequence length: forward + backward time and peak memory, on CPU or a GPU.

Kernels: ``dense`` (explicit softmax with the graph mask, same result as sparse), ``sparse`` (edge-list, plain
autograd: keeps (H, E, D) gathers for the backward pass), ``sparse_fused`` (edge-list, recompute backward:
:mod:`graphtransformer.edge_attention`), ``cluster`` (METIS order, dense tiles + edge list), ``flex`` (GPU only:
METIS order, FlexAttention block-sparse tiles with the graph's bitmask + edge list for sparse tiles,
:mod:`graphtransformer.flex`), and ``full_flash`` (all-pairs attention without a mask through the fused flash /
memory-efficient kernel: a different, denser result, the cost of a dense layer). Graph: SBM-like random graph
(planted communities of ~256 nodes, 80 % of edges inside, average degree ~11 with self loops), generated on the
measured device; H=4 heads x D=16, fp32. Time = median of ``--repeats`` forward+backward runs after one warm-up
(which also compiles FlexAttention); CPU memory = peak RSS growth during the last timed run (Linux: VmHWM reset
through /proc/self/clear_refs; small allocations reuse freed heap and read as ~0); GPU memory = peak allocated
during the step above what was allocated before it. Each kernel stops at its ``--max-*`` size or at its first
out-of-memory (recorded); nothing is extrapolated. Writes benchmarks/results/gt_attention.json (CPU) or
gt_attention_cuda.json (GPU) after every row.

    .venv/bin/python benchmarks/gt_attention.py
    python benchmarks/gt_attention.py --device cuda --sizes 4096,65536,1048576 --max-dense 16384
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from benchmarks._common import command_list, device_name, machine, table_head
from gnn.cli import UsageError
from graphtransformer.attention import dense_attention, edge_mask, flash_dense_attention, sparse_attention
from graphtransformer.cluster import ClusterConfig, build_cluster_plan, cluster_blocked_attention, metis_relabeling
from graphtransformer.edge_attention import fused_sparse_attention
from graphtransformer.flex import FlexConfig, build_flex_plan, flex_graph_attention

H, D = 4, 16


def community_graph(n: int, seed: int = 0, device: str = "cpu") -> torch.Tensor:
    """(2, E) int64 on ``device``: ~5n random edges, 80 % inside planted communities of ~256 nodes, symmetrised,
    plus self loops, coalesced. Same graph for a seed on CPU; a GPU draws its own (same distribution)."""
    g = torch.Generator(device=device).manual_seed(seed)
    m = n * 5
    comm = torch.randint(0, max(1, n // 256), (n,), generator=g, device=device)
    src = torch.randint(0, n, (m,), generator=g, device=device)
    same = torch.rand(m, generator=g, device=device) < 0.8  # 80% of edges inside the source's community
    members = torch.argsort(comm)
    start = torch.searchsorted(comm[members], comm[src])
    count = torch.bincount(comm, minlength=int(comm.max()) + 1)[comm[src]]
    inside = members[start + (torch.rand(m, generator=g, device=device) * count).long()]
    dst = torch.where(same, inside, torch.randint(0, n, (m,), generator=g, device=device))
    loops = torch.arange(n, device=device).repeat(2, 1)
    ei = torch.cat([torch.stack([src, dst]), torch.stack([dst, src]), loops], dim=1)
    return torch.unique(ei, dim=1)


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return -1


def _step(fn, q, k, v) -> None:
    out, _ = fn(q, k, v)
    out.sum().backward()
    q.grad = k.grad = v.grad = None


def _measure_cpu(fn, q, k, v, repeats: int) -> dict:
    _step(fn, q, k, v)  # warm-up
    times, peak_mib = [], float("nan")
    for i in range(repeats):
        base = -1
        if i == repeats - 1:
            try:
                Path("/proc/self/clear_refs").write_text("5")
                base = _rss_kib("VmRSS")
            except OSError:
                pass
        t0 = time.perf_counter()
        _step(fn, q, k, v)
        times.append(time.perf_counter() - t0)
        if base >= 0:
            peak_mib = (_rss_kib("VmHWM") - base) / 1024
    return {"fwd_bwd_ms": 1e3 * statistics.median(times), "peak_rss_growth_mib": peak_mib}


def _measure_cuda(fn, q, k, v, repeats: int) -> dict:
    t0 = time.perf_counter()
    _step(fn, q, k, v)  # warm-up (FlexAttention compiles here)
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        _step(fn, q, k, v)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
        peak_mib = (torch.cuda.max_memory_allocated() - before) / 2**20
    return {"fwd_bwd_ms": statistics.median(times), "peak_mem_mib": peak_mib, "warmup_s": warmup_s}


def _kernels(ei, n: int, args, device: str) -> dict:
    """name -> (fn(q, k, v), facts about its plan: setup seconds, tiles, ...) for the kernels measured at size n."""
    kernels = {"sparse": (lambda a, b, c: sparse_attention(a, b, c, ei), {}),
               "sparse_fused": (lambda a, b, c: fused_sparse_attention(a, b, c, ei), {})}
    if n <= args.max_cluster:
        t0 = time.perf_counter()
        plan = build_cluster_plan(ei, n, ClusterConfig(num_clusters=max(1, n // 256), density_threshold=0.02))
        kernels["cluster"] = (lambda a, b, c, plan=plan: cluster_blocked_attention(a, b, c, plan),
                              {"setup_s": time.perf_counter() - t0, "dense_edge_fraction": plan.dense_edge_fraction})
    if device != "cpu" and n <= args.max_flex:
        # METIS once per size for every flex variant: the graph is relabelled in cluster order and the plans keep
        # that order (setup_s = METIS + plan); random q/k/v need no permutation.
        t0 = time.perf_counter()
        _, inverse = metis_relabeling(ei.cpu(), n, max(1, n // 256))
        ei_metis = inverse.to(ei.device)[ei]
        metis_s = time.perf_counter() - t0
        for m in (int(x) for x in args.flex_min_edges.split(",")):
            t0 = time.perf_counter()
            fplan = build_flex_plan(ei_metis, n, FlexConfig(min_tile_edges=m))
            name = "flex" if m == FlexConfig().min_tile_edges else f"flex_m{m}"
            kernels[name] = (lambda a, b, c, p=fplan: flex_graph_attention(a, b, c, p),
                             {"setup_s": metis_s + time.perf_counter() - t0, "min_tile_edges": m,
                              "tiles": fplan.num_tiles, "tile_edge_fraction": fplan.tile_edge_fraction})
    if n <= args.max_dense:
        mask = edge_mask(ei, n, n)
        kernels["dense"] = (lambda a, b, c, mask=mask: dense_attention(a, b, c, mask), {})
    if n <= args.max_flash:
        kernels["full_flash"] = (flash_dense_attention, {})  # all-pairs, no mask (TorchGT "full")
    return kernels


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="512,1024,2048,4096,16384")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--max-dense", type=int, default=4096, help="largest N of the masked dense kernel (N^2 scores)")
    p.add_argument("--max-flash", type=int, default=4096,
                   help="largest N of full_flash (no N^2 memory, but N^2 time: ~30 min at 131072 on one core)")
    p.add_argument("--max-cluster", type=int, default=1 << 40, help="largest N of the cluster kernel")
    p.add_argument("--max-flex", type=int, default=1 << 40, help="largest N of the flex kernel (GPU)")
    p.add_argument("--flex-min-edges", default=str(FlexConfig().min_tile_edges),
                   help="comma list of FlexConfig.min_tile_edges to measure (the default is named 'flex')")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--deadline-s", type=float, default=float("inf"),
                   help="start no new measurement after this many seconds (a lease-bounded GPU run)")
    p.add_argument("--out", default=None, help="default benchmarks/results/gt_attention[_cuda].json")
    p.add_argument("--merge", action="store_true",
                   help="keep the rows already in --out that this run does not measure (e.g. one slow size later)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError("--device cuda but PyTorch sees no CUDA device; use --device cpu")
    args.out = args.out or ("benchmarks/results/gt_attention.json" if device == "cpu"
                            else "benchmarks/results/gt_attention_cuda.json")
    measure = _measure_cpu if device == "cpu" else _measure_cuda
    command = "python benchmarks/gt_attention.py " + " ".join(sys.argv[1:])
    rows, t_start, failed = [], time.perf_counter(), set()
    if args.merge and Path(args.out).exists():
        old = json.loads(Path(args.out).read_text())
        sizes = {int(s) for s in args.sizes.split(",")}
        rows = [dict(r, command=r.get("command", old.get("command"))) for r in old["rows"]
                if r["num_nodes"] not in sizes]
    for n in (int(s) for s in args.sizes.split(",")):
        if time.perf_counter() - t_start > args.deadline_s:
            print(f"deadline: stopping before N={n}", flush=True)
            break
        ei = community_graph(n, device=device)
        gen = torch.Generator(device=device).manual_seed(1)
        q, k, v = (torch.randn(H, n, D, generator=gen, device=device).requires_grad_(True) for _ in range(3))
        for name, (fn, facts) in _kernels(ei, n, args, device).items():
            if name in failed or time.perf_counter() - t_start > args.deadline_s:
                continue
            row = {"kernel": name, "num_nodes": n, "num_edges": ei.shape[1], **facts, "command": command}
            try:
                row.update(measure(fn, q, k, v, args.repeats))
            except torch.OutOfMemoryError:
                row["error"] = "out of memory"
                failed.add(name)  # larger graphs would not fit either
            except Exception as exc:  # noqa: BLE001 - recorded in the row and printed; the other kernels go on
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                failed.add(name)
            rows.append(row)
            print(json.dumps(row), flush=True)
            _write(args.out, rows, args.threads, command, device)  # every row: a cut-off run keeps what it measured
            if device != "cpu":
                torch.cuda.empty_cache()
    result = _write(args.out, rows, args.threads, command, device)
    n, speedup = result["largest_dense_n"], result["speedup_at_largest_dense_n"]
    if n is not None:  # None when no size was at or under --max-dense
        print(f"dense/sparse fwd+bwd speed-up at N={n}: {speedup:.1f}x")


def _write(out: str, rows: list[dict], threads: int, command: str, device: str) -> dict:
    by = {(r["kernel"], r["num_nodes"]): r["fwd_bwd_ms"] for r in rows if "fwd_bwd_ms" in r}
    speedups = {n: by[("dense", n)] / by[("sparse", n)] for (kind, n) in by if kind == "dense" and ("sparse", n) in by}
    flash = {n: by[("full_flash", n)] / by[("sparse", n)] for (kind, n) in by
             if kind == "full_flash" and ("sparse", n) in by}
    largest = max(speedups) if speedups else None
    result = {"heads": H, "head_dim": D, "dtype": "float32", "threads": threads, "rows": rows,
              "device": device_name(device),
              "dense_over_sparse_speedup": speedups, "full_flash_over_sparse_speedup": flash,
              "largest_dense_n": largest, "speedup_at_largest_dense_n": speedups[largest] if speedups else None,
              "torch": torch.__version__, "command": command, "machine": machine()}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result, indent=1))
    return result


def render(res: dict, name: str = "gt_attention") -> list[str]:
    default = res.get("command", "python benchmarks/gt_attention.py")
    listed, listing = command_list(list(dict.fromkeys(r.get("command", default) for r in res.get("rows", []))))
    gpu = res.get("device", "cpu") != "cpu"
    memory = ("GPU memory = peak allocation during a timed step above what was allocated before it. `sparse_fused` = "
              "the edge-list kernel with recompute backward; `flex` = FlexAttention block-sparse tiles in METIS order "
              "(tiles with >= 32 edges; the rest of the edges through the edge list; setup = METIS + plan), "
              "`flex_m1` = every edge in a tile; `cluster` = the CPU-era tile loop (one dense product per tile)."
              if gpu else "Memory = peak RSS growth of the last timed run (small allocations reuse freed heap and "
              "read as ~0).")
    lines = [f"## Graph transformer: attention kernels, forward + backward against sequence length"
             f"{' (GPU)' if gpu else ''}", "",
             f"File: `benchmarks/results/{name}.json`; commands: " + listed
             + f". {res.get('heads')} heads x {res.get('head_dim')}, {res.get('dtype')}, "
             + (f"torch {res.get('torch')}, " if gpu else f"{res.get('threads')} thread(s), ")
             + f"device: {res.get('device', 'cpu')}. `dense` = explicit softmax with the "
             "graph mask (same result as sparse), `full_flash` = all-pairs attention through the fused flash kernel "
             f"(the cost of a dense layer). {memory}", *listing, "",
             *table_head("nodes", "edges", "kernel", "fwd+bwd ms", "peak GPU MiB" if gpu else "peak RSS growth MiB",
                         "setup s", "edges in tiles")]
    for r in sorted(res.get("rows", []), key=lambda r: (r["num_nodes"], r["kernel"])):
        mem = r.get("peak_mem_mib", r.get("peak_rss_growth_mib"))
        share = r.get("tile_edge_fraction", r.get("dense_edge_fraction"))
        time_cell = r.get("error") or f"{r['fwd_bwd_ms']:.1f}"
        setup = r.get("setup_s")
        lines.append(f"| {r['num_nodes']} | {r['num_edges']} | {r['kernel']} | {time_cell} | "
                     f"{'-' if mem is None else f'{mem:.1f}'} | {'-' if setup is None else f'{setup:.1f}'} | "
                     f"{'-' if share is None else f'{share:.2f}'} |")
    for key, label in (("dense_over_sparse_speedup", "Masked dense / sparse time"),
                       ("full_flash_over_sparse_speedup", "All-pairs flash / sparse time")):
        speed = res.get(key, {})
        if speed:
            lines += ["", f"{label}: " + ", ".join(f"N={n}: {v:.1f}x" for n, v in
                                                   sorted(speed.items(), key=lambda kv: int(kv[0])))]
    return lines + [""]


def render_cuda(res: dict) -> list[str]:
    """gt_attention_cuda.json (this script with ``--device cuda``): the same table, under that file's name."""
    return render(res, "gt_attention_cuda")


if __name__ == "__main__":
    main()
