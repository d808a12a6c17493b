"""Progress reporting that reads well on a terminal and in a log: a live bar on a terminal, nothing per update
off one (a redirected bar writes a carriage-return fragment per update, thousands per run), and one summary
line per finished run in both cases (`seed_line`)."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from tqdm.auto import tqdm


def on_terminal() -> bool:
    """Whether stderr, where bars are drawn, is a terminal."""
    return sys.stderr.isatty()


def progress_bar(iterable: Iterable, *, enabled: bool, desc: str) -> tqdm:
    """``iterable`` wrapped in a bar that is drawn only when ``enabled`` and stderr is a terminal."""
    return tqdm(iterable, disable=not (enabled and on_terminal()), leave=False, desc=desc, dynamic_ncols=True)


def seed_line(dataset: str, model: str, quant: str, seed: int, fold: int, *, best_epoch: int, val_acc: float,
              test_acc: float, seconds: float, bits: float | None = None) -> str:
    """One line per finished seed (node tasks) or fold (graph tasks): selected epoch, accuracies in %, bits."""
    where = f"seed {seed}" if fold == 0 else f"seed {seed} fold {fold}"
    extra = f", {bits:.2f} bits" if bits is not None else ""
    return (f"  {dataset} {model} {quant} {where}: epoch {best_epoch}, val {100 * val_acc:.2f}, "
            f"test {100 * test_acc:.2f}{extra} ({seconds:.0f} s)")
