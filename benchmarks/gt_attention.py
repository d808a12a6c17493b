"""Attention kernels (dense-with-mask, edge-list sparse, cluster-blocked) on CPU: fwd+bwd time and peak memory vs N.

Kernels: ``dense`` (explicit softmax with the graph mask, same result as sparse), ``sparse``, ``cluster``, and
``full_flash`` (all-pairs attention without a mask through the fused CPU flash kernel: a different, denser result,
the cost of a dense layer). Graph: SBM-like random graph (planted communities, average degree ~10, + self
loops); H=4 heads x D=16, fp32. Time = median of ``--repeats`` forward+backward runs after one warm-up; memory =
peak RSS growth during the last timed run (Linux: VmHWM reset through /proc/self/clear_refs; small allocations
reuse freed heap and read as ~0). Dense stops at ``--max-dense`` nodes (its N^2 scores), the others
go on; nothing is extrapolated. Writes benchmarks/results/gt_attention.json.

    .venv/bin/python benchmarks/gt_attention.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import machine  # noqa: E402

from graphtransformer.attention import dense_attention, edge_mask, flash_dense_attention, sparse_attention
from graphtransformer.cluster import ClusterConfig, build_cluster_plan, cluster_blocked_attention

H, D = 4, 16


def _graph(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    m = n * 5
    comm = torch.randint(0, max(1, n // 256), (n,), generator=g)
    src = torch.randint(0, n, (m,), generator=g)
    same = torch.rand(m, generator=g) < 0.8  # 80% of edges inside the source's community
    members = torch.argsort(comm)
    start = torch.searchsorted(comm[members], comm[src])
    count = torch.bincount(comm, minlength=int(comm.max()) + 1)[comm[src]]
    inside = members[start + (torch.rand(m, generator=g) * count).long()]
    dst = torch.where(same, inside, torch.randint(0, n, (m,), generator=g))
    ei = torch.cat([torch.stack([src, dst]), torch.stack([dst, src]), torch.arange(n).repeat(2, 1)], dim=1)
    return torch.unique(ei, dim=1)


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return -1


def _measure(fn, q, k, v, repeats: int) -> dict:
    def step():
        out, _ = fn(q, k, v)
        out.sum().backward()
        q.grad = k.grad = v.grad = None

    step()  # warm-up
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
        step()
        times.append(time.perf_counter() - t0)
        if base >= 0:
            peak_mib = (_rss_kib("VmHWM") - base) / 1024
    return {"fwd_bwd_ms": 1e3 * statistics.median(times), "peak_rss_growth_mib": peak_mib}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="512,1024,2048,4096,16384")
    p.add_argument("--max-dense", type=int, default=4096, help="largest N of the masked dense kernel (N^2 scores)")
    p.add_argument("--max-flash", type=int, default=4096,
                   help="largest N of full_flash (no N^2 memory, but N^2 time: ~30 min at 131072 on one core)")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="benchmarks/results/gt_attention.json")
    p.add_argument("--merge", action="store_true",
                   help="keep the rows already in --out that this run does not measure (e.g. one slow size later)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    command = "python benchmarks/gt_attention.py " + " ".join(sys.argv[1:])
    rows = []
    if args.merge and Path(args.out).exists():
        old = json.loads(Path(args.out).read_text())
        sizes = {int(s) for s in args.sizes.split(",")}
        rows = [dict(r, command=r.get("command", old.get("command"))) for r in old["rows"]
                if r["num_nodes"] not in sizes]
    for n in (int(s) for s in args.sizes.split(",")):
        ei = _graph(n)
        q, k, v = (torch.randn(H, n, D, requires_grad=True) for _ in range(3))
        plan = build_cluster_plan(ei, n, ClusterConfig(num_clusters=max(1, n // 256), density_threshold=0.02))
        kernels = {"sparse": lambda a, b, c, ei=ei: sparse_attention(a, b, c, ei),
                   "cluster": lambda a, b, c, plan=plan: cluster_blocked_attention(a, b, c, plan)}
        if n <= args.max_dense:
            mask = edge_mask(ei, n, n)
            kernels["dense"] = lambda a, b, c, mask=mask: dense_attention(a, b, c, mask)
        if n <= args.max_flash:
            kernels["full_flash"] = flash_dense_attention  # all-pairs, no mask (TorchGT "full"), fused CPU kernel
        for name, fn in kernels.items():
            row = {"kernel": name, "num_nodes": n, "num_edges": ei.shape[1], **_measure(fn, q, k, v, args.repeats),
                   "command": command}
            if name == "cluster":
                row["dense_edge_fraction"] = plan.dense_edge_fraction
            rows.append(row)
            print(json.dumps(row), flush=True)
            _write(args.out, rows, args.threads, command)  # after every row: a cut-off run keeps what it measured
    result = _write(args.out, rows, args.threads, command)
    n, speedup = result["largest_dense_n"], result["speedup_at_largest_dense_n"]
    if n is not None:  # None when no size was at or under --max-dense
        print(f"dense/sparse fwd+bwd speed-up at N={n}: {speedup:.1f}x")


def _write(out: str, rows: list[dict], threads: int, command: str) -> dict:
    by = {(r["kernel"], r["num_nodes"]): r["fwd_bwd_ms"] for r in rows}
    speedups = {n: by[("dense", n)] / by[("sparse", n)] for (kind, n) in by if kind == "dense"}
    flash = {n: by[("full_flash", n)] / by[("sparse", n)] for (kind, n) in by if kind == "full_flash"}
    largest = max(speedups) if speedups else None
    result = {"heads": H, "head_dim": D, "dtype": "float32", "threads": threads, "rows": rows,
              "dense_over_sparse_speedup": speedups, "full_flash_over_sparse_speedup": flash,
              "largest_dense_n": largest, "speedup_at_largest_dense_n": speedups[largest] if speedups else None,
              "torch": torch.__version__, "command": command, "machine": machine()}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
