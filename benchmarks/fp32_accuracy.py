"""FP32 accuracy of every (dataset, model) pair, validation-selected, over seeds (node) or 10 folds (graph).

    python benchmarks/fp32_accuracy.py                      # the full table (hours on 2 CPU cores)
    python benchmarks/fp32_accuracy.py --only cora:gcn,cora:gat --seeds 10

Results are merged into benchmarks/results/fp32_accuracy.json (one entry per pair, written as each finishes);
`benchmarks/make_results.py` turns them into RESULTS.md with the published figures beside ours.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import load_results, machine, save_results  # noqa: E402

from gnn.data.loaders import load_dataset  # noqa: E402
from gnn.experiment import format_table, run_experiment  # noqa: E402
from gnn.presets import model_and_train_config  # noqa: E402

NODE_MODELS = ("gcn", "gat", "sage", "gin")
PAIRS = [(d, m) for d in ("cora", "citeseer") for m in NODE_MODELS] + \
        [(d, m) for d in ("mutag", "proteins") for m in ("gin", "gcn")] + \
        [(d, m) for d in ("amazon-computers", "coauthor-cs", "cornell5") for m in NODE_MODELS]

# Published figures on the same data and protocol family (mean, std in %, source).
PUBLISHED = {
    "cora:gcn": (81.5, None, "Kipf & Welling 2017, Table 2"),
    "citeseer:gcn": (70.3, None, "Kipf & Welling 2017, Table 2"),
    "cora:gat": (83.0, 0.7, "Velickovic et al. 2018, Table 2"),
    "citeseer:gat": (72.5, 0.7, "Velickovic et al. 2018, Table 2"),
    "mutag:gin": (89.4, 5.6, "Xu et al. 2019, Table 1 (GIN-0; test-fold selection protocol)"),
    "proteins:gin": (76.2, 2.8, "Xu et al. 2019, Table 1 (GIN-0; test-fold selection protocol)"),
    "mutag:gcn": (85.6, 5.8, "Xu et al. 2019, Table 1 (GCN baseline)"),
    "proteins:gcn": (76.0, 3.2, "Xu et al. 2019, Table 1 (GCN baseline)"),
    "amazon-computers:gcn": (82.6, 2.4, "Shchur et al. 2018, Table 2"),
    "amazon-computers:gat": (78.0, 19.0, "Shchur et al. 2018, Table 2"),
    "amazon-computers:sage": (82.4, 1.8, "Shchur et al. 2018, Table 2 (GS-mean)"),
    "coauthor-cs:gcn": (91.1, 0.5, "Shchur et al. 2018, Table 2"),
    "coauthor-cs:gat": (90.5, 0.6, "Shchur et al. 2018, Table 2"),
    "coauthor-cs:sage": (91.3, 2.8, "Shchur et al. 2018, Table 2 (GS-mean)"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", help="comma-separated dataset:model pairs (default: all)")
    p.add_argument("--seeds", type=int, default=10)
    args = p.parse_args()
    pairs = [tuple(x.split(":")) for x in args.only.split(",")] if args.only else PAIRS
    rows = []
    for dataset, model in pairs:
        graph = load_dataset(dataset)
        model_cfg, train_cfg = model_and_train_config(graph, model)
        t = time.perf_counter()
        out = run_experiment(graph, model_cfg, train_cfg, list(range(args.seeds)), progress=False)
        out["wall_seconds"] = time.perf_counter() - t
        out["published"] = PUBLISHED.get(f"{dataset}:{model}")
        out["protocol"] = "10 folds" if graph.task == "graph" else f"{args.seeds} seeds"
        results = load_results("fp32_accuracy")  # re-read: other runs of this script may have added pairs
        results["machine"] = machine()
        results.setdefault("pairs", {})[f"{dataset}:{model}"] = out
        save_results("fp32_accuracy", results)
        rows.append(out)
        print(format_table([out]), flush=True)
    print(format_table(rows))


if __name__ == "__main__":
    main()
