"""FP32 accuracy of every (dataset, model) pair, validation-selected, over seeds (node) or 10 folds (graph).

    python benchmarks/fp32_accuracy.py                      # the full table (hours on 2 CPU cores)
    python benchmarks/fp32_accuracy.py --only cora:gcn,cora:gat --seeds 10

Results are merged into benchmarks/results/fp32_accuracy.json (one entry per pair, written as each finishes);
`render` below turns them into RESULTS.md's table (`benchmarks/make_results.py`), the published figures beside ours.
"""

from __future__ import annotations

import argparse
import time

from benchmarks._common import load_results, machine, machine_line, pm, save_results, table_head
from gnn.data.loaders import load_dataset
from gnn.experiment import format_table, run_experiment
from gnn.presets import model_and_train_config

NODE_MODELS = ("gcn", "gat", "sage", "gin")
PAIRS = [(d, m) for d in ("cora", "citeseer") for m in NODE_MODELS] + \
        [(d, m) for d in ("mutag", "proteins") for m in ("gin", "gcn")] + \
        [(d, m) for d in ("amazon-computers", "coauthor-cs", "cornell5") for m in NODE_MODELS]

# Published figures on the same data and protocol family, per source: "dataset:model" -> (mean, std) in %.
PUBLISHED_BY_SOURCE = {
    "Kipf & Welling 2017, Table 2": {"cora:gcn": (81.5, None), "citeseer:gcn": (70.3, None)},
    "Velickovic et al. 2018, Table 2": {"cora:gat": (83.0, 0.7), "citeseer:gat": (72.5, 0.7)},
    "Xu et al. 2019, Table 1 (GIN-0; test-fold selection protocol)": {"mutag:gin": (89.4, 5.6),
                                                                      "proteins:gin": (76.2, 2.8)},
    "Xu et al. 2019, Table 1 (GCN baseline)": {"mutag:gcn": (85.6, 5.8), "proteins:gcn": (76.0, 3.2)},
    "Shchur et al. 2018, Table 2": {"amazon-computers:gcn": (82.6, 2.4), "amazon-computers:gat": (78.0, 19.0),
                                    "coauthor-cs:gcn": (91.1, 0.5), "coauthor-cs:gat": (90.5, 0.6)},
    "Shchur et al. 2018, Table 2 (GS-mean)": {"amazon-computers:sage": (82.4, 1.8), "coauthor-cs:sage": (91.3, 2.8)},
}
# "dataset:model" -> (mean, std, source), as fp32_accuracy.json records it.
PUBLISHED = {pair: (*figures, source) for source, pairs in PUBLISHED_BY_SOURCE.items()
             for pair, figures in pairs.items()}


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


def render(res: dict) -> list[str]:
    lines = ["## FP32 accuracy (validation-selected test accuracy, %)", "",
             "Command: `python benchmarks/fp32_accuracy.py` (file: `benchmarks/results/fp32_accuracy.json`). "
             "Node tasks: one model per seed on the dataset's split (Planetoid public split; Amazon/Coauthor "
             "20/30 per class, cornell5 50/25/25 of labelled nodes; split seed 0). Graph tasks: stratified 10-fold "
             "CV, validation = next fold. ms/epoch: measured beside other jobs, not a speed figure. "
             "The epoch is chosen by validation accuracy (ties: lower validation loss), never by test.", "",
             *table_head("dataset", "model", "runs", "ours: test acc", "ours: val acc", "published", "source",
                         "ms/epoch")]
    for _key, r in sorted(res.get("pairs", {}).items()):
        s = r["summary"]
        pub = r.get("published")
        pub_s = "-" if not pub else (f"{pub[0]:.1f}" + (f" +- {pub[1]:.1f}" if pub[1] is not None else ""))
        src = pub[2] if pub else "-"
        lines.append(f"| {r['dataset']} | {r['model']} | {r['protocol']} | {pm(s['test_acc'])} | "
                     f"{pm(s['val_acc'])} | {pub_s} | {src} | {s['ms_per_epoch']:.1f} |")
    lines += ["", machine_line(res), ""]
    return lines


if __name__ == "__main__":
    main()
