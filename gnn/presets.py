"""Hyper-parameter presets per (dataset, architecture, quantization method), as Python functions.

FP32 values follow the papers whose numbers we compare against: Kipf & Welling (GCN, Planetoid), Velickovic et al.
(GAT, Planetoid), Shchur et al. 2018 (Amazon / Coauthor protocol), Xu et al. 2019 (GIN, TU datasets). Learned-bit
quantization (a method whose training extension ``learns_bits``, gnn/hooks.py: a2q, degree-aware) on node tasks
changes them as `learned_bits_recipe` says, the best recipe validated on the node datasets
(benchmarks/quant_defaults.py, RESULTS.md "Quantization defaults"). Rules look at the data (input density, task),
not at dataset names, except the Planetoid datasets' fixed epoch counts.
"""

from __future__ import annotations

from dataclasses import replace

from gnn import hooks
from gnn.data.loaders import GraphData
from gnn.models import CONVS, ModelConfig
from gnn.trainer import TrainConfig

SMALL_GRAPH_NODES = 10_000  # node tasks below it get the Planetoid papers' settings (Cora, CiteSeer)
DENSE_INPUT_DENSITY = 0.1  # fraction of non-zero input features above which inputs count as dense
QUANT_MIN_HIDDEN = 64  # hidden width of learned-bit node models (all heads together), at least
QUANT_FIXED_BITS = 8  # signed bits of weights and XW with learned feature bits
XW_ARCHS = ("gcn", "gin")  # models with per-channel XW / input points that take xw_bits
LEARNED_XW_START_BITS = 4  # where learned XW bits (--learn-xw-bits) start: the learned features' init, not the 8 above


def feature_density(graph: GraphData) -> float:
    """Fraction of the node-feature matrix that is non-zero (sparse COO features count their stored values)."""
    x = graph.data.x
    if x is None or x.numel() == 0:
        return 0.0
    nonzero = int((x.coalesce().values() != 0).sum()) if x.is_sparse else int((x != 0).sum())
    return nonzero / x.numel()


def model_and_train_config(graph: GraphData, arch: str, quant: str = "none",
                           recipe: bool = True) -> tuple[ModelConfig, TrainConfig]:
    """The default configuration of ``arch`` on ``graph``, trained with quantization method ``quant``.
    ``recipe=False``: the FP32 configuration for every method (how the quantization grid and A2Q's comparisons
    train; with A2Q's penalty, ``bits_control="penalty"``, it reproduces them)."""
    model, train = fp32_config(graph, arch)
    if quant == "none":
        return model, train
    train = replace(train, quant=quant)  # an unknown method is refused here (TrainConfig)
    if recipe and hooks.get(quant).learns_bits and graph.task == "node":
        return learned_bits_recipe(arch, model, train)
    return model, train  # Degree-Quant, and graph tasks (A2Q's penalty on the Nearest Neighbor pool): FP32 training


def learned_bits_recipe(arch: str, model: ModelConfig, train: TrainConfig) -> tuple[ModelConfig, TrainConfig]:
    """Learned bits (a2q, degree-aware) on a node task: 8-bit weights and XW (A2Q's code keeps them at 4, which
    cost Cora GCN about half a point at 1.7 feature bits), hidden width at least 64 (low-bit features need more
    channels), and the bits projected onto the target after every step (``bits_control="project"``,
    quant/qat/budget.py) instead of A2Q's penalty, which overshot the target by up to a bit."""
    heads = model.heads if CONVS[arch].multi_head else 1  # GAT's hidden_dim is per head
    model = replace(model, hidden_dim=max(model.hidden_dim, -(-QUANT_MIN_HIDDEN // heads)))
    xw = {"xw_bits": QUANT_FIXED_BITS} if arch in XW_ARCHS else {}
    return model, replace(train, weight_bits=QUANT_FIXED_BITS, bits_control="project", **xw)


def describe(graph: GraphData, arch: str, quant: str = "none", recipe: bool = True) -> str:
    """One line naming the preset in force and how it differs from the FP32 one, for logs and --help."""
    fp32_model, fp32_train = fp32_config(graph, arch)
    model, train = model_and_train_config(graph, arch, quant, recipe)
    changed = [f"{k} {getattr(model, k)}" for k in ("hidden_dim", "dropout") if getattr(model, k) !=
               getattr(fp32_model, k)]
    changed += [f"{k} {getattr(train, k)}" for k in ("epochs", "lr", "weight_bits", "xw_bits", "bits_control")
                if getattr(train, k) != getattr(fp32_train, k)]
    base = (f"{arch} on {graph.name}: hidden {model.hidden_dim}, {model.num_layers} layers, dropout {model.dropout}, "
            f"{train.epochs} epochs{f' (patience {train.patience})' if train.patience else ''}, lr {train.lr}, "
            f"weight decay {train.weight_decay}")
    return base + (f"; for {quant}: " + ", ".join(changed) if changed else "")


def fp32_config(graph: GraphData, arch: str) -> tuple[ModelConfig, TrainConfig]:
    """The FP32 configuration of ``arch`` on ``graph`` (the papers' settings)."""
    if arch not in CONVS:
        raise ValueError(f"unknown model {arch!r}; valid: {', '.join(CONVS)}")
    if graph.task == "topology":
        raise ValueError(f"dataset {graph.name!r} has no node features ({graph.info.get('note', '')}); "
                         f"it serves topology work (degree statistics, accelerator workloads), not training")
    dims = {"in_dim": graph.num_features, "out_dim": graph.num_classes}
    if graph.task == "graph":
        if arch == "gin":
            # Xu et al. 2019: 5 layers counting the input (4 GIN layers), readout of every layer including the
            # input scored by its own linear layer (summed), hidden 32, batch 32, Adam lr 0.01 halved every 50
            # epochs, 350 epochs.
            return (ModelConfig(arch="gin", hidden_dim=32, num_layers=4, dropout=0.5, norm="batch", pool="sum",
                                readout_input=True, head="linear-sum", **dims),
                    TrainConfig(epochs=350, lr=0.01, weight_decay=0.0, batch_size=32, lr_decay_every=50))
        if arch == "gcn":
            return (ModelConfig(arch="gcn", hidden_dim=64, num_layers=3, dropout=0.5, norm="batch",
                                pool="mean", **dims),
                    TrainConfig(epochs=200, lr=0.01, weight_decay=0.0, batch_size=32))
        raise ValueError(f"graph-level tasks support gin and gcn; got {arch!r}")
    small = graph.data.num_nodes < SMALL_GRAPH_NODES  # a property of the data, not its name: a user's graph too
    # Amazon / Coauthor (Shchur et al. 2018): early stopping on validation accuracy with patience 50, here within
    # at most 300 epochs. Planetoid: the papers' fixed epoch counts.
    patience = 0 if small else 50
    if arch == "gcn":
        model = ModelConfig(arch="gcn", hidden_dim=16 if small else 64, dropout=0.5, **dims)
        train = TrainConfig(epochs=200 if small else 300, lr=0.01, weight_decay=5e-4, patience=patience)
    elif arch == "gat":
        model = ModelConfig(arch="gat", hidden_dim=8, heads=8, out_heads=1, dropout=0.6, attn_dropout=0.6, **dims)
        train = TrainConfig(epochs=500 if small else 300, lr=0.005, weight_decay=5e-4, patience=patience)
    elif arch == "sage":
        # Dense inputs: lr 0.005. Amazon Computers' raw binary rows are about a third ones (43 to 558 of 767), and
        # at lr 0.01 SAGE's root weights diverged in the first epochs on 1 of 10 seeds (stuck at chance); at 0.005
        # every seed trains (benchmarks/results/fp32_accuracy.json). Bag-of-words inputs are ~1% non-zero.
        lr = 0.005 if feature_density(graph) >= DENSE_INPUT_DENSITY else 0.01
        model = ModelConfig(arch="sage", hidden_dim=64, dropout=0.5, **dims)
        train = TrainConfig(epochs=200 if small else 300, lr=lr, weight_decay=5e-4, patience=patience)
    else:  # gin on node tasks; Planetoid: hidden 128 and dropout 0.8, chosen on validation accuracy (3 seeds)
        model = ModelConfig(arch="gin", hidden_dim=128 if small else 64, dropout=0.8 if small else 0.5, **dims)
        train = TrainConfig(epochs=200 if small else 300, lr=0.01, weight_decay=5e-4, patience=patience)
    return model, train


def with_overrides(cfg, **overrides):
    """``dataclasses.replace`` that ignores ``None`` values (unset command-line options)."""
    return replace(cfg, **{k: v for k, v in overrides.items() if v is not None})
