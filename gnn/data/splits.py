"""Seeded train/validation/test splits (pure functions over label vectors)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor


@dataclass(frozen=True)
class Split:
    """Index sets of one split (node indices for node tasks, graph indices for graph tasks)."""

    train: Tensor  # (n_train,) int64
    val: Tensor  # (n_val,) int64
    test: Tensor  # (n_test,) int64

    def __post_init__(self) -> None:
        all_idx = torch.cat([self.train, self.val, self.test])
        if all_idx.unique().numel() != all_idx.numel():
            raise ValueError("Split: train, val and test overlap")


def mask_to_index(mask: Tensor) -> Tensor:
    return mask.nonzero(as_tuple=False).view(-1)


def per_class_split(y: Tensor, num_train_per_class: int, num_val_per_class: int, seed: int) -> Split:
    """Shchur et al. (2018) protocol: per class, ``num_train_per_class`` train and ``num_val_per_class``
    validation nodes drawn at random; every other labelled node is test. Labels < 0 mean unknown."""
    rng = np.random.default_rng(seed)
    y_np = y.numpy()
    train, val, test = [], [], []
    for c in np.unique(y_np[y_np >= 0]):
        idx = rng.permutation(np.flatnonzero(y_np == c))
        if idx.size < num_train_per_class + num_val_per_class:
            raise ValueError(
                f"per_class_split: class {c} has {idx.size} nodes, fewer than "
                f"{num_train_per_class}+{num_val_per_class}"
            )
        train.append(idx[:num_train_per_class])
        val.append(idx[num_train_per_class : num_train_per_class + num_val_per_class])
        test.append(idx[num_train_per_class + num_val_per_class :])
    return Split(*(torch.from_numpy(np.sort(np.concatenate(p))).long() for p in (train, val, test)))


def fraction_split(y: Tensor, train_frac: float, val_frac: float, seed: int) -> Split:
    """Random split of the labelled nodes (y >= 0) by fractions; the rest is test (LINKX protocol)."""
    rng = np.random.default_rng(seed)
    labelled = np.flatnonzero(y.numpy() >= 0)
    perm = rng.permutation(labelled)
    n_train = int(round(train_frac * perm.size))
    n_val = int(round(val_frac * perm.size))
    parts = perm[:n_train], perm[n_train : n_train + n_val], perm[n_train + n_val :]
    return Split(*(torch.from_numpy(np.sort(p)).long() for p in parts))


def stratified_kfold(y: Tensor, num_folds: int, seed: int) -> list[Split]:
    """Stratified k-fold cross-validation: fold k is test, fold (k+1) mod K is validation, the rest train.

    Each class is shuffled with ``seed`` and dealt round-robin into the folds, so every fold has the class
    ratios of the whole set (to within one sample).
    """
    if num_folds < 3:
        raise ValueError(f"stratified_kfold: num_folds={num_folds}; need >= 3 (train, val and test folds)")
    rng = np.random.default_rng(seed)
    y_np = y.numpy()
    fold_of = np.empty(y_np.size, dtype=np.int64)
    offset = 0
    for c in np.unique(y_np):
        idx = rng.permutation(np.flatnonzero(y_np == c))
        fold_of[idx] = (np.arange(idx.size) + offset) % num_folds
        offset += idx.size  # continue dealing where the previous class stopped: balanced fold sizes
    splits = []
    for k in range(num_folds):
        v = (k + 1) % num_folds
        test = np.flatnonzero(fold_of == k)
        val = np.flatnonzero(fold_of == v)
        train = np.flatnonzero((fold_of != k) & (fold_of != v))
        splits.append(Split(*(torch.from_numpy(p).long() for p in (train, val, test))))
    return splits
