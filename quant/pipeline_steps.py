"""The quantization steps of ``python -m gnn.pipeline`` (registered lazily by ``gnn/pipeline.py``).

Both take the pipeline's context dict (keys ``dataset``, ``model``, ``seeds``, ``epochs``, ``data_root``,
``run_dir`` (Path), ``progress``, and ``fp32`` = the FP32 experiment output) and add their outputs to it:

* :func:`step_quantize` trains the A2Q-quantized model (target bits ``ctx["target_bits"]``, default 1.7, A2Q's
  headline Cora setting) on the same seeds, validation-selected; a GIN also quantizes its MLP's hidden activation
  (``quantize_mlp_hidden``, as A2Q's code), so that every tensor of its export is low-bit (without it the export
  carries the hidden activation in 16-bit fixed point); adds ``quant`` (experiment output) and ``quant_run_dir``.
* :func:`step_export` exports the first seed's model to ``<run_dir>/<dataset>_<model>.qgraph`` (e.g.
  ``cora_gcn.qgraph``), reloads and verifies it, prints accuracy, average bits and bytes; adds ``export_path``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DEFAULT_TARGET_BITS = 1.7


def step_quantize(ctx: dict) -> None:
    from gnn.data.loaders import load_dataset
    from gnn.experiment import format_table, run_experiment
    from gnn.presets import describe, model_and_train_config, with_overrides

    graph = load_dataset(ctx["dataset"], data_root=ctx.get("data_root"))
    model_cfg, train_cfg = model_and_train_config(graph, ctx["model"], "a2q")  # the preset of gnn.train
    print(f"   preset: {describe(graph, ctx['model'], 'a2q')}")
    target = ctx.get("target_bits") or DEFAULT_TARGET_BITS
    train_cfg = with_overrides(train_cfg, epochs=ctx.get("epochs"), target_bits=target,
                               quantize_mlp_hidden=True if ctx["model"] == "gin" else None)
    run_dir = Path(ctx["run_dir"]) / "a2q"
    out = run_experiment(graph, model_cfg, train_cfg, list(range(ctx["seeds"])), run_dir=run_dir,
                         progress=ctx.get("progress", False))
    ctx["quant"], ctx["quant_run_dir"] = out, run_dir
    print(format_table([r for r in (ctx.get("fp32"), out) if r]))
    bits = [r["quant_summary"].get("avg_bits") for r in out["per_run"] if r.get("quant_summary")]
    bits = [b for b in bits if b is not None]
    if bits:
        within = sum(bool(r["quant_summary"].get("within_budget")) for r in out["per_run"])
        print(f"   A2Q average feature bits (no sign bit, target {target}): {np.mean(bits):.3f} "
              f"(per seed: {', '.join(f'{b:.3f}' for b in bits)}; {within} of {len(bits)} seeds within budget)")


def step_export(ctx: dict) -> None:
    from quant.export import describe, export_run, load

    if ctx["model"] not in ("gcn", "sage", "gin", "gat"):
        print(f"   skipped: the .qgraph export covers GCN, GraphSAGE, GIN and GAT (model={ctx['model']!r})")
        return
    run_dir = ctx.get("quant_run_dir") or Path(ctx["run_dir"]) / "a2q"
    if not (Path(run_dir) / "config.json").is_file():
        raise FileNotFoundError(f"step_export: no quantized run in {run_dir}; run the 'quantize' step first")
    out = Path(ctx["run_dir"]) / f"{ctx['dataset']}_{ctx['model']}.qgraph"
    export_run(run_dir, out, data_root=ctx.get("data_root"), overwrite=True)
    q = load(out)
    q.verify()
    ctx["export_path"] = out
    print(describe(q))
