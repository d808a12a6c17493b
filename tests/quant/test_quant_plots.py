"""benchmarks/quant_table.plot: both quantization plots are written; the bits-vs-degree plot takes the preset grid's
cells only (``_common.is_preset_grid_cell``), not the tuning sweeps."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import quant_table  # noqa: E402
from _common import is_preset_grid_cell  # noqa: E402


def cell(method, target=None, command="python benchmarks/quant_table.py --datasets cora", penalty=25.0):
    c = {"dataset": "cora", "model": "gcn", "method": method, "target_bits": target, "command": command,
         "test_acc": {"mean": 80.0, "std": 1.0, "n": 10}}
    if method != "fp32":
        c.update(avg_bits={"mean": target or 8.0, "std": 0.0}, penalty_weight=penalty,
                 mean_bits_by_in_degree_seed0={"1": 2.0, "5": 3.0})
    return c


def test_preset_grid_cells_and_plots(tmp_path):
    preset, sweep = cell("a2q", 4.0), cell("a2q", 1.7, command="... --epochs 1000 --hidden 64")
    assert is_preset_grid_cell(preset) and not is_preset_grid_cell(sweep)
    assert not is_preset_grid_cell(cell("a2q", 4.0, penalty=10.0))
    assert not is_preset_grid_cell({**cell("a2q", 1.7, command="... --fp32-warmup 200")})
    files = quant_table.plot([cell("fp32"), preset, sweep, cell("degree-aware", 1.7)], tmp_path)
    assert files == ["quant_acc_vs_bits.png", "quant_bits_vs_degree.png"]
    assert all((tmp_path / f).stat().st_size > 10_000 for f in files)
