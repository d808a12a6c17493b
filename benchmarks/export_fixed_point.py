"""Integer-path accuracy of a trained quantized GCN vs its fake-quant model for several fixed-point formats.

``python benchmarks/export_fixed_point.py --run <run_dir of python -m gnn.train --quant a2q>`` writes
``benchmarks/results/export_fixed_point.json``: per (frac_bits, psum_bits) the integer test accuracy, the change in
points vs the float32 fake-quant model, and the fraction of nodes whose prediction agrees.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from _common import machine, save_results  # noqa: E402

from quant.convert import load_trained  # noqa: F401
from quant.archs.gcn.convert import to_quantized_gcn  # noqa: F401
from quant.archs.gcn.integer import gcn_forward_int  # noqa: F401

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
           "machine": machine(), "command": "python benchmarks/export_fixed_point.py --run <run_dir>"}
    print(f"wrote {save_results('export_fixed_point', out)}")
    return out


if __name__ == "__main__":
    main()
