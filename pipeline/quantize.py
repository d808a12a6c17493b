"""The quantization steps of the main job (``python -m pipeline``; wired up by ``pipeline/steps.py``), as plain
functions of typed arguments that print their report and return their output:

* :func:`train_quantized` trains the A2Q-quantized model (target bits ``target_bits``, default 1.7, A2Q's headline
  Cora setting) over seeds ``0 .. seeds-1``, validation-selected, into ``run_dir``; a GIN also quantizes its MLP's
  hidden activation (``quantize_mlp_hidden``, as A2Q's code), so that every tensor of its export is low-bit (without
  it the export carries the hidden activation in 16-bit fixed point); returns the experiment output.
* :func:`export_for_accelerator` exports the first seed's model of a quantized run to a ``.qgraph`` (the pipeline
  names it ``<run_dir>/<dataset>_<model>.qgraph``, e.g. ``cora_gcn.qgraph``), reloads and verifies it, prints
  accuracy, average bits and bytes; returns its path (None for a model the export does not cover).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DEFAULT_TARGET_BITS = 1.7


def train_quantized(dataset: str, model: str, seeds: int, run_dir: Path, *, epochs: int | None = None,
                    data_root: str | None = None, target_bits: float = DEFAULT_TARGET_BITS, progress: bool = False,
                    fp32: dict | None = None) -> dict:
    """Train the A2Q-quantized ``model`` on ``dataset`` (the preset of ``gnn.train --quant a2q``) into ``run_dir``;
    prints the preset, the results table (after ``fp32``'s row, an FP32 experiment output, when given) and the
    average feature bits; returns the experiment output."""
    from gnn.data.loaders import load_dataset
    from gnn.experiment import format_table, run_experiment
    from gnn.presets import describe, model_and_train_config, with_overrides

    graph = load_dataset(dataset, data_root=data_root)
    model_cfg, train_cfg = model_and_train_config(graph, model, "a2q")  # the preset of gnn.train
    print(f"   preset: {describe(graph, model, 'a2q')}")
    train_cfg = with_overrides(train_cfg, epochs=epochs, target_bits=target_bits,
                               quantize_mlp_hidden=True if model == "gin" else None)
    out = run_experiment(graph, model_cfg, train_cfg, list(range(seeds)), run_dir=Path(run_dir), progress=progress)
    print(format_table([r for r in (fp32, out) if r]))
    bits = [r["quant_summary"].get("avg_bits") for r in out["per_run"] if r.get("quant_summary")]
    bits = [b for b in bits if b is not None]
    if bits:
        within = sum(bool(r["quant_summary"].get("within_budget")) for r in out["per_run"])
        print(f"   A2Q average feature bits (no sign bit, target {target_bits}): {np.mean(bits):.3f} "
              f"(per seed: {', '.join(f'{b:.3f}' for b in bits)}; {within} of {len(bits)} seeds within budget)")
    return out


def export_for_accelerator(quant_run_dir: Path, out: Path, *, model: str, data_root: str | None = None) -> Path | None:
    """Export the first seed's model of the quantized run ``quant_run_dir`` to ``out`` (overwritten), reload and
    verify it and print its description; returns ``out``, or None (with a skip line) for a model the ``.qgraph``
    export does not cover. Raises FileNotFoundError when ``quant_run_dir`` holds no run."""
    from quant.archs import integer_archs
    from quant.export import describe, export_run
    from quant.qgraph import load

    exported = integer_archs()
    if model not in exported:
        names = ", ".join(s.display_name for s in exported.values())
        print(f"   skipped: the .qgraph export covers {names} (model={model!r})")
        return None
    if not (Path(quant_run_dir) / "config.json").is_file():
        raise FileNotFoundError(f"export: no quantized run in {quant_run_dir}; run the 'quantize' step first")
    out = Path(out)
    export_run(quant_run_dir, out, data_root=data_root, overwrite=True)
    q = load(out)
    q.verify()
    print(describe(q))
    return out
