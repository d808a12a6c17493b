"""Training and evaluation with validation-only model selection, run directories and resumable checkpoints.

Checkpoints hold tensors and plain data only and are read with ``torch.load(weights_only=True)``: a crafted file
cannot run code. They are written atomically (gnn/rundir.py) and carry every random generator an epoch draws from,
so that a resumed run reproduces the uninterrupted one exactly.

Model selection: the epoch with the best validation accuracy, ties broken by the lower validation loss.
Test accuracy is read at that epoch only. The maximum test accuracy over epochs is also recorded, clearly
named, because the A2Q code reports it; it is never the headline.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnn import hooks
from gnn.data.batching import GraphBatcher
from gnn.data.loaders import GraphData
from gnn.data.splits import Split
from gnn.progress import progress_bar
from gnn.rundir import RunDirError, append_line, save_tensors, truncate_jsonl, write_json

DEFAULT_FIXED_BITS = 4  # QuantConfig's weight_bits / xw_bits default (A2Q's code); a test keeps them equal
# Settings that only a quant method reads, with their defaults; quant="none" refuses them set (target_bits,
# bits_control and penalty_weight are ignored without one, as grids that run FP32 beside the methods pass them).
QUANT_ONLY_FIELDS = {"fp32_warmup_epochs": 0, "quantize_mlp_hidden": False, "weight_bits": DEFAULT_FIXED_BITS,
                     "xw_bits": DEFAULT_FIXED_BITS, "learn_xw_bits": False}


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Optimisation settings of one run (per seed or fold).

    Attributes:
        epochs: number of epochs.
        lr, weight_decay: Adam settings of the model parameters.
        patience: stop after this many epochs without a better validation result (0: never).
        lr_decay_every, lr_decay: multiply the learning rate by ``lr_decay`` every ``lr_decay_every`` epochs
            (0: constant; the GIN paper halves it every 50 epochs).
        batch_size: graphs per mini-batch (graph tasks).
        quant: training method: ``"none"`` (FP32) or the name of a registered `gnn.hooks.TrainingExtension`
            (the quant package registers a2q, degree-aware, dq-int8 and dq-int4, which quantize the model with
            ``quant.quantize_`` before training). The extension's ``validate`` checks the settings below that
            it reads (the quant package: the `QuantConfig` they map to); this class checks the others.
        target_bits: average feature bits the quantization's memory penalty aims at. With learned bits
            (a2q, degree-aware), model selection prefers epochs whose stored average bits meet the target:
            a model over budget is chosen only if no epoch meets it, and the result says so
            (``quant_summary["within_budget"]``).
        bits_control: how learned bits meet ``target_bits`` (``QuantConfig.bits_control``: auto, project,
            penalty).
        penalty_weight: ``a`` of the memory penalty ``a * relu(M - M_target)^2`` (M in KB), with the penalty.
        fp32_warmup_epochs: with ``quant``, first train the FP32 model this many epochs (same optimiser settings,
            no model selection), then quantize it (the quantizers calibrate on the trained model) and train
            ``epochs`` more: quantization-aware fine-tuning from a trained model instead of from scratch. 0: off.
        quantize_mlp_hidden: with ``quant``, also quantize GIN's MLP hidden activation, as A2Q's GIN code does
            (``quant.qat.config.QuantConfig.quantize_mlp_hidden``).
        weight_bits, xw_bits: with a learned-bit ``quant`` (a2q, degree-aware), the fixed signed bitwidths of the
            weights (per output channel) and of XW (per channel) (``QuantConfig.weight_bits`` / ``xw_bits``; A2Q's
            code keeps both at 4). They are not node features: the memory penalty and the average bits do not
            count them.
        learn_xw_bits: with a learned-bit ``quant`` and a GCN, learn XW's bits per node instead (initialised at
            ``xw_bits``, counted in the budget; ``QuantConfig.learn_xw_bits``).
        hw_cost, hw_arch, hw_config, hw_budget: with a learned-bit ``quant``, hold an accelerator's cost (DRAM
            bytes, energy or latency of the extension's hardware model) to a budget instead of the memory in KB
            (``QuantConfig.hw_cost`` and the fields after it; None: the memory budget).
        checkpoint_every: save a resumable checkpoint every this many epochs.
        device: ``"cpu"`` or ``"cuda"``.
    """

    epochs: int = 200
    lr: float = 0.01
    weight_decay: float = 5e-4
    patience: int = 0
    lr_decay_every: int = 0
    lr_decay: float = 0.5
    batch_size: int = 32
    quant: str = "none"
    target_bits: float = 4.0
    bits_control: str = "auto"
    penalty_weight: float = 2.5
    fp32_warmup_epochs: int = 0
    quantize_mlp_hidden: bool = False
    weight_bits: int = DEFAULT_FIXED_BITS
    xw_bits: int = DEFAULT_FIXED_BITS
    learn_xw_bits: bool = False
    hw_cost: str | None = None
    hw_arch: str = "mega"
    hw_config: str | None = None
    hw_budget: str | None = None
    checkpoint_every: int = 50
    device: str = "cpu"

    def __post_init__(self) -> None:
        for name in ("lr", "weight_decay", "lr_decay"):
            v = getattr(self, name)
            if not math.isfinite(v):  # NaN passes every comparison below; it would train to a NaN result
                raise ValueError(f"TrainConfig: {name}={v} must be a finite number")
        if self.epochs < 1 or self.batch_size < 1 or self.patience < 0 or self.checkpoint_every < 1:
            raise ValueError("TrainConfig: epochs, batch_size, checkpoint_every must be >= 1 and patience >= 0")
        if self.fp32_warmup_epochs < 0:
            raise ValueError(f"TrainConfig: fp32_warmup_epochs={self.fp32_warmup_epochs} must be >= 0")
        if self.lr_decay_every < 0 or not 0.0 < self.lr_decay <= 1.0:
            raise ValueError(f"TrainConfig: lr_decay_every={self.lr_decay_every} must be >= 0 and "
                             f"lr_decay={self.lr_decay} in (0, 1]")
        if self.lr <= 0 or self.weight_decay < 0:
            raise ValueError(f"TrainConfig: lr={self.lr} must be > 0 and weight_decay >= 0")
        if self.quant == hooks.FP32:
            set_ = [k for k, default in QUANT_ONLY_FIELDS.items() if getattr(self, k) != default]
            if set_:
                why = (" (fp32_warmup_epochs warms up a model before quantization; an FP32 run just trains longer: "
                       "raise epochs)" if "fp32_warmup_epochs" in set_ else "")
                raise ValueError(f"TrainConfig: {', '.join(set_)} needs a quant method{why}; quant="
                                 f"{hooks.FP32!r} trains FP32")
        else:
            try:
                hooks.get(self.quant).validate(self)
            except ValueError as e:
                raise ValueError(f"TrainConfig: {e}") from None
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"TrainConfig: device {self.device!r}; use cpu or cuda")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("TrainConfig: --device cuda requested but no CUDA device is available; use cpu")


@dataclass
class EpochMetrics:
    epoch: int
    train_loss: float
    val_loss: float
    val_acc: float
    test_acc: float
    seconds: float


@dataclass
class SeedResult:
    """Outcome of one seed (node tasks) or one fold (graph tasks)."""

    seed: int
    fold: int
    best_epoch: int
    val_acc: float
    val_loss: float
    test_acc: float  # at the validation-selected epoch: the headline
    max_test_acc_over_epochs: float  # A2Q-code-style number, never the headline
    ms_per_epoch: float  # mean training-step time (forward + backward + update), milliseconds
    quant_summary: dict = field(default_factory=dict)
    best_sha256: str | None = None  # SHA-256 of the run's best.pt (None without a run directory, or older runs)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))  # noqa: NPY002 (seeds libraries that use the legacy global RNG)
    torch.manual_seed(seed)


def rng_state(loader_generator: torch.Generator | None = None, device: str = "cpu") -> dict:
    """Every random generator training draws from (torch, CUDA on a CUDA run, NumPy, Python ``random``, the
    graph-task loader's), as tensors and plain containers so that ``torch.load(weights_only=True)`` reads it."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()  # noqa: NPY002 (the legacy global RNG, seeded above)
    state = {"torch": torch.get_rng_state(),
             "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "gauss": float(gauss)},
             "python": random.getstate(),
             "loader": None if loader_generator is None else loader_generator.get_state()}
    if torch.device(device).type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict | Tensor, loader_generator: torch.Generator | None = None) -> None:
    """Restore what `rng_state` saved (a bare tensor: the torch state of checkpoints older than this format)."""
    if isinstance(state, Tensor):
        torch.set_rng_state(state)
        return
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))  # noqa: NPY002
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    if loader_generator is not None and state["loader"] is not None:
        loader_generator.set_state(state["loader"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


CHECKPOINT_KEYS = frozenset({"model", "optimizer", "scheduler", "best", "max_test", "step_seconds", "epoch", "rng"})


def load_checkpoint(path: Path) -> dict:
    """Read a ``last.pt`` with ``weights_only=True``: tensors and plain data only, never arbitrary objects (a
    crafted pickle would run code). Raises RunDirError for a file this trainer did not write."""
    fix = "delete it, or start the run again with --overwrite"
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise RunDirError(f"{path} is not a checkpoint of this trainer: it holds objects other than tensors and "
                          f"plain data, which are never loaded (they could run code); {fix}") from None
    except (RuntimeError, EOFError, OSError) as e:
        raise RunDirError(f"{path} is unreadable ({str(e).splitlines()[0] if str(e) else type(e).__name__}); "
                          f"{fix}") from None
    if not isinstance(ck, dict) or not CHECKPOINT_KEYS <= ck.keys():
        raise RunDirError(f"{path} is not a checkpoint of this trainer (missing keys); {fix}")
    return ck


def wants_sparse_input(model: nn.Module, graph: GraphData, device: str = "cpu") -> bool:
    """Feed input features as a sparse tensor when they are large and sparse (density < 5%, > 1M entries)
    and the first layer either projects before aggregating, so it never densifies them, or, on a CPU, keeps its
    quantized aggregate sparse (`first_layer_aggregates_sparse`: 4x to 8x faster per step on Coauthor CS; a GPU
    takes the dense aggregate, measured fast and the path the GPU cells ran). Same math, less time."""
    if graph.task != "node" or not _large_and_sparse(graph.data.x):
        return False
    return first_layer_takes_sparse(model) or (torch.device(device).type == "cpu"
                                               and first_layer_aggregates_sparse(model))


def sparse_input_pays(model: nn.Module, x: Tensor) -> bool:
    """Whether node features ``x`` (N, F) go in sparse to a first layer that projects them unaggregated and
    unquantized (distributed/'s rule: its halo exchange needs that layer)."""
    return first_layer_takes_sparse(model) and _large_and_sparse(x)


def _large_and_sparse(x: Tensor) -> bool:
    return x.numel() > 1_000_000 and float((x != 0).float().mean()) < 0.05


def first_layer_takes_sparse(model: nn.Module) -> bool:
    """Whether the first layer projects sparse input without densifying it (``accepts_sparse_input``)."""
    return _first_layer_says(model, "accepts_sparse_input")


def first_layer_aggregates_sparse(model: nn.Module) -> bool:
    """Whether the first layer aggregates sparse input into a sparse, quantized aggregate
    (``aggregates_sparse_input``: a quantized GraphSAGE or GIN on bag-of-words features)."""
    return _first_layer_says(model, "aggregates_sparse_input")


def _first_layer_says(model: nn.Module, question: str) -> bool:
    """The answer of the model's first conv to the no-argument method ``question`` (False if it has none)."""
    ask = getattr(getattr(model, "convs", [None])[0], question, None)
    return ask is not None and ask()


def _is_better(val_acc: float, val_loss: float, best_acc: float, best_loss: float, within_budget: bool = True,
               best_within_budget: bool = True) -> bool:
    """Higher validation accuracy, ties by lower validation loss; an epoch within the bit budget always beats
    one over it."""
    if within_budget != best_within_budget:
        return within_budget
    return val_acc > best_acc or (val_acc == best_acc and val_loss < best_loss)


def _stored_average_bits(model: nn.Module, cfg: TrainConfig) -> float | None:
    """Average stored feature bits (without the sign bit) of a model with learned bits, else None (the training
    extension's ``average_bits``)."""
    ext = hooks.extension_for(cfg.quant)
    return None if ext is None else ext.average_bits(model)


class _Task:
    """The task-specific parts of an epoch: node-level full batch, or graph-level mini-batches."""

    def __init__(self, graph: GraphData, split: Split, cfg: TrainConfig, seed: int,
                 use_sparse_input: bool = False) -> None:
        self.graph, self.split, self.cfg = graph, split, cfg
        self.device = torch.device(cfg.device)
        self.generator = None  # the train loader's shuffling generator (graph tasks), saved in checkpoints
        if graph.task == "node":
            self.data = graph.data.to(self.device)
            if use_sparse_input:
                self.data = self.data.clone()
                self.data.x = self.data.x.to_sparse()
            self.idx = {k: getattr(split, k).to(self.device) for k in ("train", "val", "test")}
        else:
            self.generator = torch.Generator().manual_seed(seed)
            ds = graph.graphs
            self.loaders = {
                "train": GraphBatcher(ds, split.train, cfg.batch_size, shuffle=True, generator=self.generator),
                "val": GraphBatcher(ds, split.val, 256),
                "test": GraphBatcher(ds, split.test, 256),
            }

    def train_step(self, model: nn.Module, opt: torch.optim.Optimizer, penalty) -> float:
        model.train()
        if self.graph.task == "node":
            opt.zero_grad()
            out = model(self.data.x, self.data.edge_index)
            loss = F.cross_entropy(out[self.idx["train"]], self.data.y[self.idx["train"]])
            (loss + penalty(model)).backward()
            opt.step()
            return loss.item()
        total, count = 0.0, 0
        for batch in self.loaders["train"]:
            batch = batch.to(self.device)
            opt.zero_grad()
            out = model(batch.x, batch.edge_index, batch.batch)
            loss = F.cross_entropy(out, batch.y)
            (loss + penalty(model)).backward()
            opt.step()
            total += loss.item() * batch.num_graphs
            count += batch.num_graphs
        return total / count

    @torch.no_grad()
    def evaluate(self, model: nn.Module) -> dict[str, tuple[float, float]]:
        """(loss, accuracy) on val and test."""
        model.eval()
        result = {}
        if self.graph.task == "node":
            out = model(self.data.x, self.data.edge_index)
            for k in ("val", "test"):
                idx = self.idx[k]
                y = self.data.y[idx]
                loss = float(F.cross_entropy(out[idx], y))
                result[k] = (loss, int((out[idx].argmax(-1) == y).sum()) / max(idx.numel(), 1))  # exact fraction
            return result
        for k in ("val", "test"):
            loss_sum, correct, n = 0.0, 0, 0
            for batch in self.loaders[k]:
                batch = batch.to(self.device)
                out = model(batch.x, batch.edge_index, batch.batch)
                loss_sum += float(F.cross_entropy(out, batch.y, reduction="sum"))
                correct += int((out.argmax(-1) == batch.y).sum())
                n += batch.num_graphs
            result[k] = (loss_sum / n, correct / n)
        return result


def _make_optimizer(model: nn.Module, cfg: TrainConfig) -> tuple[torch.optim.Optimizer, callable]:
    """Adam over the model parameters, plus the training extension's groups, penalty and after-step hook."""
    ext = hooks.extension_for(cfg.quant)
    if ext is None:
        return _fp32_optimizer(model, cfg), _zero_penalty
    ext_groups = ext.param_groups(model, cfg)
    ext_ids = {id(p) for g in ext_groups for p in g["params"]}
    base = [p for p in model.parameters() if id(p) not in ext_ids]
    groups = [{"params": base, "lr": cfg.lr, "weight_decay": cfg.weight_decay}] + ext_groups
    opt = torch.optim.Adam(groups)
    # every opt.step() ends with the extension's hook (quant: the projected bits meet the target), in any loop
    opt.register_step_post_hook(lambda *_: ext.after_step(model))
    return opt, ext.penalty


def _fp32_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    return torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)


def _zero_penalty(model: nn.Module) -> Tensor | float:
    return 0.0


def apply_quantization(model: nn.Module, graph: GraphData, cfg: TrainConfig) -> nn.Module:
    """Prepare a built FP32 model for ``cfg.quant`` with its training extension's ``prepare`` (the quant methods:
    ``quant.quantize_`` in place); no-op for ``quant="none"``."""
    ext = hooks.extension_for(cfg.quant)
    return model if ext is None else ext.prepare(model, graph, cfg)


def fp32_warmup(model: nn.Module, graph: GraphData, split: Split, cfg: TrainConfig, *, seed: int,
                progress: bool = True) -> None:
    """Train the FP32 ``model`` in place for ``cfg.fp32_warmup_epochs`` epochs (Adam with ``cfg``'s lr and weight
    decay, no learning-rate decay, no selection): the starting point of quantization-aware fine-tuning."""
    task = _Task(graph, split, cfg, seed, use_sparse_input=wants_sparse_input(model, graph, cfg.device))
    opt = _fp32_optimizer(model, cfg)
    for _ in progress_bar(range(cfg.fp32_warmup_epochs), enabled=progress,
                          desc=f"{graph.name} seed {seed} FP32 warm-up"):
        task.train_step(model, opt, _zero_penalty)


def train_one(model: nn.Module, graph: GraphData, split: Split, cfg: TrainConfig, *, seed: int, fold: int = 0,
              run_dir: Path | None = None, resume: bool = False, progress: bool = True) -> SeedResult:
    """Train ``model`` on one split and return the validation-selected result.

    With ``run_dir``, writes ``metrics.jsonl`` (one line per epoch), ``best.pt`` (selected weights),
    ``last.pt`` (resumable state every ``cfg.checkpoint_every`` epochs) and ``result.json`` (with best.pt's
    SHA-256), every file but the appended metrics atomically. ``resume`` continues from ``last.pt`` when there is
    one (metrics cut back to its epoch), else starts over. The caller owns ``run_dir`` (gnn.experiment locks it).
    """
    device = torch.device(cfg.device)
    model = model.to(device)
    last_path = run_dir / "last.pt" if run_dir else None
    ck = load_checkpoint(last_path) if resume and last_path and last_path.exists() else None
    if cfg.fp32_warmup_epochs and ck is None:  # a resumed run loads its trained quantized state instead
        fp32_warmup(model, graph, split, cfg, seed=seed, progress=progress)
    model = apply_quantization(model, graph, cfg)
    task = _Task(graph, split, cfg, seed, use_sparse_input=wants_sparse_input(model, graph, cfg.device))
    opt, penalty = _make_optimizer(model, cfg)
    # Constant when lr_decay_every is 0 (a step of 10**9 epochs never fires).
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=cfg.lr_decay_every or 10**9, gamma=cfg.lr_decay)
    best = {"acc": -1.0, "loss": math.inf, "epoch": -1, "test": 0.0, "state": None, "within_budget": False,
            "bits": None}
    max_test, step_seconds, start_epoch, best_sha = 0.0, [], 1, None
    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        best, max_test, step_seconds = ck["best"], ck["max_test"], list(ck["step_seconds"])
        start_epoch = ck["epoch"] + 1
        set_rng_state(ck["rng"], task.generator)
    if run_dir:
        run_dir.mkdir(parents=True, exist_ok=True)
        truncate_jsonl(run_dir / "metrics.jsonl", start_epoch - 1)  # drop epochs past the checkpoint (or all)
        if best["state"] is not None:  # best.pt may be from an epoch after the checkpoint: back to its best
            best_sha = save_tensors(best["state"], run_dir / "best.pt")
    bar = progress_bar(range(start_epoch, cfg.epochs + 1), enabled=progress,
                       desc=f"{graph.name} seed {seed} fold {fold}")
    for epoch in bar:
        t0 = time.perf_counter()
        train_loss = task.train_step(model, opt, penalty)
        sched.step()
        step_seconds.append(time.perf_counter() - t0)
        ev = task.evaluate(model)
        (val_loss, val_acc), (_, test_acc) = ev["val"], ev["test"]
        max_test = max(max_test, test_acc)
        bits = _stored_average_bits(model, cfg)
        within = bits is None or bits <= cfg.target_bits + 1e-9
        if _is_better(val_acc, val_loss, best["acc"], best["loss"], within, best.get("within_budget", True)):
            best = {"acc": val_acc, "loss": val_loss, "epoch": epoch, "test": test_acc,
                    "state": copy.deepcopy(model.state_dict()), "within_budget": within, "bits": bits}
            if run_dir:
                best_sha = save_tensors(best["state"], run_dir / "best.pt")
        if run_dir:
            m = EpochMetrics(epoch, train_loss, val_loss, val_acc, test_acc, step_seconds[-1])
            append_line(run_dir / "metrics.jsonl", json.dumps(asdict(m)))
            if epoch % cfg.checkpoint_every == 0 or epoch == cfg.epochs:
                save_tensors({"model": model.state_dict(), "optimizer": opt.state_dict(),
                              "scheduler": sched.state_dict(), "best": best, "max_test": max_test,
                              "step_seconds": step_seconds, "epoch": epoch,
                              "rng": rng_state(task.generator, cfg.device)}, last_path)
        bar.set_postfix(val=f"{val_acc:.3f}", best=f"{best['acc']:.3f}")
        if cfg.patience and epoch - best["epoch"] >= cfg.patience:
            break
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    summary = {}
    ext = hooks.extension_for(cfg.quant)
    if ext is not None:
        if graph.task == "node":  # statistics forward passes record (non-zero codes, for one) from the selected
            task.evaluate(model)  # model, not the last epoch's: Amazon's predicted DRAM was 10 % low without it
        summary = ext.summary(model)
        if best["bits"] is not None:
            summary["within_budget"] = bool(best["within_budget"])
    result = SeedResult(seed=seed, fold=fold, best_epoch=best["epoch"], val_acc=best["acc"],
                        val_loss=best["loss"], test_acc=best["test"], max_test_acc_over_epochs=max_test,
                        ms_per_epoch=1000.0 * float(np.mean(step_seconds)), quant_summary=summary,
                        best_sha256=best_sha)
    if run_dir:
        write_json(run_dir / "result.json", asdict(result))
    return result


def summarize(results: list[SeedResult]) -> dict:
    """Mean and sample standard deviation (in percent) over seeds or folds."""
    def stats(values: list[float]) -> dict:
        a = np.asarray(values, dtype=np.float64) * 100.0
        return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if a.size > 1 else 0.0, "n": int(a.size)}

    return {
        "test_acc": stats([r.test_acc for r in results]),
        "val_acc": stats([r.val_acc for r in results]),
        "max_test_acc_over_epochs": stats([r.max_test_acc_over_epochs for r in results]),
        "ms_per_epoch": float(np.mean([r.ms_per_epoch for r in results])),
    }
