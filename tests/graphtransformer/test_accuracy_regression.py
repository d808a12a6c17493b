"""Regression tests for the Cora accuracy bug (24 % test accuracy, train loss 0.09) and its neighbours.

Cause: the N(0, 1) degree embedding (norm ~8) swamped the projection of row-normalised bag-of-words features (norm
~0.1), so the model fitted the training nodes through structure alone. The tests use a Cora-like synthetic task
whose labels depend on the words only (random graph, degrees carry no label information), and check that outputs
stay aligned with labels when nodes are relabelled (the cluster reordering of distributed runs).
"""

from dataclasses import replace

import pytest
import torch

from graphtransformer.model import GraphTransformer
from graphtransformer.train import _reorder
from graphtransformer.training import (
    TrainConfig,
    is_better,
    model_config,
    prepare,
    single_process_rows,
    train_seed,
)


def _train(data, split, in_dim, classes, cfg, seed=0):
    graph, pe = prepare(data, cfg)
    torch.manual_seed(seed)
    model = GraphTransformer(model_config(cfg, in_dim, classes))
    return model, train_seed(model, data, split, pe, single_process_rows(graph), cfg, seed=seed)


# Every field the tests depend on is pinned: the library defaults are tuned on Cora and move (when ffn_ratio's
# default went 2 -> 0 and weight decay 5e-4 -> 5e-3, the reordering test's model stopped learning in 25 epochs).
CFG = TrainConfig(attention="interleaved", num_layers=3, hidden_dim=32, num_heads=2, dropout=0.1, input_dropout=0.0,
                  sparse_residual=True, ffn_ratio=2, max_degree=64, pe="laplacian", pe_dim=4, lr=1e-2,
                  weight_decay=5e-4, optimizer="adamw", epochs=40, patience=40)


def test_features_are_not_swamped_by_structural_embeddings_at_init(bag_of_words_task):
    data, _, vocab, classes = bag_of_words_task()
    cfg = replace(CFG, hidden_dim=64, num_heads=4)
    graph, pe = prepare(data, cfg)
    torch.manual_seed(0)
    model = GraphTransformer(model_config(cfg, vocab, classes))
    with torch.no_grad():
        feat = model.input(data.x).norm(dim=1).mean()
        struct = (model.degree(graph.degree) + model.pe(pe)).norm(dim=1).mean()
    assert feat / struct > 0.3, (feat, struct)  # was 0.12 / 7.9 on Cora with the N(0, 1) embedding


def test_learns_labels_carried_by_sparse_row_normalised_features(bag_of_words_task):
    """40 training nodes, labels in the words only: a features-first model generalises; the swamped one
    memorised the training nodes (train loss -> 0) at chance-level test accuracy."""
    data, split, vocab, classes = bag_of_words_task()
    _, rec = _train(data, split, vocab, classes, CFG)
    assert rec["test_acc"] > 0.45, rec  # chance 0.25; the swamped model: 0.26 at train loss 0.15


@pytest.mark.slow
def test_outputs_stay_aligned_with_labels_after_cluster_reordering(bag_of_words_task):
    """Relabelling the nodes (METIS cluster-major, as distributed runs do) must not change what is learned: the
    permuted run reaches the accuracy of the original one (outputs compared with the labels in the same order)."""
    data, split, vocab, classes = bag_of_words_task(seed=1)
    cfg = replace(CFG, pe="random-walk", dropout=0.0, epochs=25, patience=25)  # RWPE is permutation-equivariant
    data_p, split_p = _reorder(data, split, parts=4)
    assert not torch.equal(data_p.y, data.y)  # a real permutation
    _, rec = _train(data, split, vocab, classes, cfg)
    _, rec_p = _train(data_p, split_p, vocab, classes, cfg)
    # equal up to float summation order (a node or two); a label/output mismatch would be at chance (0.25)
    assert abs(rec["val_acc"] - rec_p["val_acc"]) <= 0.035 and abs(rec["test_acc"] - rec_p["test_acc"]) <= 0.035
    assert rec["test_acc"] > 0.4 and rec_p["test_acc"] > 0.4, (rec, rec_p)


def test_selection_uses_validation_accuracy_then_validation_loss():
    best = {"val_acc": 0.8, "val_loss": 0.5, "test_acc": 0.1}
    assert is_better(0.81, 9.0, best)  # higher val accuracy wins whatever the loss
    assert is_better(0.8, 0.4, best) and not is_better(0.8, 0.6, best)  # tie: lower val loss
    assert not is_better(0.79, 0.0, best)  # test accuracy never enters
