"""Integer-path accuracy of a trained quantized GCN vs its fake-quant model for several fixed-point formats.

``python benchmarks/export_fixed_point.py --run <run_dir of python -m gnn.train --quant a2q>`` writes
``benchmarks/results/export_fixed_point.json``: per (frac_bits, psum_bits) the integer test accuracy, the change in
points vs the float32 fake-quant model, and the fraction of nodes whose prediction agrees.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from benchmarks._common import machine, machine_line, save_results, table_head
from quant.archs.gcn.convert import to_quantized_gcn
from quant.archs.gcn.integer import gcn_forward_int
from quant.convert import load_trained

COMMAND = "python benchmarks/export_fixed_point.py --run <run_dir>"  # as the result file records it
FORMATS = ((8, 16), (10, 16), (12, 16), (12, 32), (14, 32), (16, 32))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, required=True)
    args = p.parse_args(argv)
    run = load_trained(args.run)
    d, test = run.graph.data, run.graph.splits[0].test.numpy()
    y = d.y.numpy()
    with torch.no_grad():
        fake = run.model(d.x, d.edge_index).numpy()
    acc_fake = float((fake[test].argmax(1) == y[test]).mean())
    rows = []
    for frac, psum in FORMATS:
        t0 = time.perf_counter()
        conv = to_quantized_gcn(run.model, d.x, d.edge_index, frac_bits=frac, psum_bits=psum)
        _, logits = gcn_forward_int(conv.model, conv.edge_index)
        acc = float((logits[test].argmax(1) == y[test]).mean())
        rows.append({"frac_bits": frac, "psum_bits": psum, "test_acc_integer": acc,
                     "delta_pt": 100 * (acc - acc_fake),
                     "prediction_agreement": float((logits.argmax(1) == fake.argmax(1)).mean()),
                     "seconds": time.perf_counter() - t0})
        print(rows[-1])
    # the run directory's name only (a path of this machine means nothing elsewhere); its training is recorded
    out = {"run": args.run.name, "seeds": run.config.get("seeds"), "dataset": run.config["dataset"],
           "quant": run.config["train"]["quant"],
           "target_bits": run.config["train"]["target_bits"], "epochs": run.config["train"]["epochs"],
           "penalty_weight": run.config["train"]["penalty_weight"],
           "test_acc_fake_quant": acc_fake, "formats": rows,
           "note": "integer path (quant.archs.gcn.integer) vs the float32 fake-quant model; one seed",
           "machine": machine(), "command": COMMAND}
    print(f"wrote {save_results('export_fixed_point', out)}")
    return out


def render(res: dict) -> list[str]:
    command = res.get("command", COMMAND)
    lines = ["## Integer path: fixed-point format sweep (one trained model)", "",
             f"Command: `{command}` (file: `benchmarks/results/export_fixed_point.json`). One {res.get('dataset')} "
             f"GCN trained with {res.get('quant')} at target {res.get('target_bits')} bits (penalty a = "
             f"{res.get('penalty_weight')}) for {res.get('epochs')} epochs (`python -m gnn.train`, the preset "
             f"otherwise, seeds {res.get('seeds')}); its float32 fake-quant model tests "
             f"{100 * res['test_acc_fake_quant']:.1f} %. Per requantization format (fraction "
             "bits of the multipliers, partial-sum width) the integer path's test accuracy, its change against "
             "the fake-quant model, and the share of all nodes whose predicted class agrees. The multi-seed check "
             "of the 0.3-pt target is the table \"Integer path against fake-quant\".", "",
             *table_head("frac bits", "psum bits", "integer test acc (%)", "change (pt)", "prediction agreement")]
    for r in res.get("formats", []):
        lines.append(f"| {r['frac_bits']} | {r['psum_bits']} | {100 * r['test_acc_integer']:.1f} | "
                     f"{r['delta_pt']:+.1f} | {100 * r['prediction_agreement']:.2f} % |")
    return lines + ["", machine_line(res, sort_keys=True), ""]


if __name__ == "__main__":
    main()
