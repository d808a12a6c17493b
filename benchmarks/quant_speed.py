"""Training-step time of quantization-aware training against FP32, in one run.

    python benchmarks/quant_speed.py [--datasets cora,coauthor-cs] [--models gcn] [--repeats 5] [--steps 10]

For each (dataset, model) the FP32 model and its quantized copies (A2Q at 1.7 bits, degree-aware, Degree-Quant
INT8 / INT4) run the trainer's own training step (forward, loss, memory penalty, backward, Adam with the
quantizer parameter groups). The methods alternate repeat by repeat so that machine noise hits all alike; the
median over repeats is reported, and the ratio method / FP32 (issue target for A2Q: <= 1.5).
Writes benchmarks/results/quant_speed.json (``--name`` picks another file; ``--merge`` keeps the cases of earlier
runs). Every (dataset, model) of the quantization grid, a few steps each (RESULTS.md's grid timing table):

    python benchmarks/quant_speed.py --datasets cora,citeseer,amazon-computers,coauthor-cs \
        --models gcn,gin,gat,sage --repeats 3 --steps 3 --name quant_speed_grid
    python benchmarks/quant_speed.py --datasets mutag,proteins --models gcn,gin --repeats 3 --steps 3 \
        --name quant_speed_grid --merge

``--dense-input`` also times every method whose run feeds the input features sparse (bag-of-words graphs:
``gnn.trainer.wants_sparse_input``) with dense input, as ``<method>@dense``: the speed-up of the sparse path
(e.g. a quantized GraphSAGE's sparse first-layer aggregate on Coauthor CS) measured in the same run:

    python benchmarks/quant_speed.py --datasets coauthor-cs --models sage --repeats 3 --steps 2 --dense-input \
        --name quant_speed_sparse_input
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from _common import load_results, machine, save_results  # noqa: E402

from gnn.data.loaders import load_dataset  # noqa: E402
from gnn.models import build_model  # noqa: E402
from gnn.presets import model_and_train_config  # noqa: E402
from gnn.trainer import _make_optimizer, _Task, apply_quantization, wants_sparse_input  # noqa: E402

METHODS = ("none", "a2q", "degree-aware", "dq-int8", "dq-int4")


class Runner:
    """One method's model, optimizer and task, ready to time training steps."""

    def __init__(self, graph, arch: str, method: str, target_bits: float, sparse: bool | None = None) -> None:
        model_cfg, train_cfg = model_and_train_config(graph, arch)
        self.cfg = replace(train_cfg, quant=method, target_bits=target_bits, penalty_weight=25.0,
                           bits_control="penalty")  # the recorded tables' step; the projection: quant_defaults
        torch.manual_seed(0)
        self.model = apply_quantization(build_model(model_cfg), graph, self.cfg)
        self.sparse = wants_sparse_input(self.model, graph) if sparse is None else sparse
        self.task = _Task(graph, graph.splits[0], self.cfg, 0, use_sparse_input=self.sparse)
        self.opt, self.penalty = _make_optimizer(self.model, self.cfg)
        for _ in range(2):  # warm-up: caches (normalised adjacency, CSR matrices), allocator
            self.task.train_step(self.model, self.opt, self.penalty)

    def time_steps(self, steps: int) -> float:
        t = time.perf_counter()
        for _ in range(steps):
            self.task.train_step(self.model, self.opt, self.penalty)
        return 1000.0 * (time.perf_counter() - t) / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="cora,coauthor-cs")
    p.add_argument("--models", default="gcn")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--target-bits", type=float, default=1.7)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--dense-input", action="store_true",
                   help="also time each method that takes sparse input with dense input (<method>@dense)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: the ratios are per CPU core, as the issue's targets)")
    p.add_argument("--name", default="quant_speed", help="results file name (benchmarks/results/<name>.json)")
    p.add_argument("--merge", action="store_true",
                   help="keep the cases of earlier runs in the results file (each case names its command)")
    args = p.parse_args()
    methods = args.methods.split(",")
    if methods[0] != "none":
        raise SystemExit("error: --methods must start with 'none' (the FP32 reference of the ratios)")
    torch.set_num_threads(args.threads)  # recorded by machine(); the environment's default is every core
    load_start = os.getloadavg()[0]
    command = "python benchmarks/quant_speed.py " + " ".join(sys.argv[1:])
    out = {"machine": machine(), "command": command, "repeats": args.repeats, "steps": args.steps,
           "target_bits": args.target_bits, "cases": load_results(args.name).get("cases", {}) if args.merge else {}}
    for name in args.datasets.split(","):
        graph = load_dataset(name)
        for arch in args.models.split(","):
            runners = {m: Runner(graph, arch, m, args.target_bits) for m in methods}
            if args.dense_input:
                runners.update({f"{m}@dense": Runner(graph, arch, m, args.target_bits, sparse=False)
                                for m in methods if runners[m].sparse})
            ms = {m: [] for m in runners}
            for _ in range(args.repeats):
                for m, r in runners.items():
                    ms[m].append(r.time_steps(args.steps))
            fp32 = statistics.median(ms["none"])
            case = {m: {"ms": statistics.median(v), "all_ms": v, "ratio_vs_fp32": statistics.median(v) / fp32,
                        "sparse_input": runners[m].sparse, "command": command} for m, v in ms.items()}
            out["cases"][f"{name}:{arch}"] = case
            print(f"{name:<14}{arch:<5} " + "  ".join(f"{m} {c['ms']:.1f} ms (x{c['ratio_vs_fp32']:.2f})"
                                                     for m, c in case.items()), flush=True)
    out["load_average_1min"] = {"start": load_start, "end": os.getloadavg()[0]}  # shared machine: context
    print(f"written to {save_results(args.name, out)}")


if __name__ == "__main__":
    main()
