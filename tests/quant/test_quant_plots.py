"""benchmarks/quant_table.plot: the quantization plots are written; the accuracy-against-bits panels (one per dataset)
and the bits-vs-degree plot take the preset grid's cells only (``_common.is_preset_grid_cell``), not the tuning
sweeps."""

from benchmarks import quant_table
from benchmarks._common import is_preset_grid_cell


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


def test_pareto_plot_once_the_headline_recipe_ran_two_targets(tmp_path):
    def a2q(target, bits):
        return {**cell("a2q", target, command="... --hidden 64", penalty=10.0), "hidden_dim": 64,
                "avg_bits": {"mean": bits, "std": 0.0}, "runs_within_bit_budget": 10,
                "val_acc": {"mean": 81.0, "std": 0.1, "n": 10}}

    fp32 = {**cell("fp32", command="... --hidden 64"), "hidden_dim": 64}
    assert quant_table.plot([fp32, a2q(1.7, 1.3)], tmp_path)[-1] == "quant_bits_vs_degree.png"  # one point: no curve
    files = quant_table.plot([fp32, a2q(1.7, 1.3), a2q(3.0, 2.8)], tmp_path)
    assert files[-1] == "quant_pareto_cora_gcn.png" and (tmp_path / files[-1]).stat().st_size > 10_000


def test_accuracy_panels_one_per_dataset_in_table_order_without_the_sweeps():
    preset, sweep = cell("a2q", 4.0), cell("a2q", 1.7, command="... --epochs 1000 --hidden 64")
    mutag = {**cell("fp32", command="python benchmarks/quant_table.py --datasets mutag"), "dataset": "mutag"}
    citeseer = {**cell("fp32", command="python benchmarks/quant_table.py --datasets citeseer"), "dataset": "citeseer"}
    panels, from_grid = quant_table.accuracy_panels([mutag, sweep, preset, citeseer, cell("fp32")])
    assert from_grid and list(panels) == ["cora", "citeseer", "mutag"]
    assert sweep not in panels["cora"] and preset in panels["cora"] and len(panels["cora"]) == 2
    panels, from_grid = quant_table.accuracy_panels([sweep])  # no preset cell: the sweep is all there is
    assert not from_grid and panels == {"cora": [sweep]}
