"""Checkpoint and resume of graph-transformer training, one folder per seed, on the GNN stack's crash-consistent
protocol (:mod:`distributed.checkpoint`: a fresh step directory per checkpoint, atomic per-rank files, a hashed
manifest that switches a step in).

Layout of ``--checkpoint-dir D``: ``D/seed<k>/latest.json`` + ``D/seed<k>/step-<epoch>/`` (torch.distributed.checkpoint
files of model and optimizer, FSDP2-sharded or replicated, and ``rank-<r>.pt``: every RNG state the next epochs draw
from, the Laplacian sign-flip generator, the halo codecs' stochastic-rounding generators, the best record and the
patience counter), and ``D/seed<k>/done.json`` once seed ``k`` has finished (a restarted job skips it). A resumed
seed continues after its last checkpointed epoch and reproduces the uninterrupted run; ``torchrun --max-restarts``
restarts a crashed job into it.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from distributed import checkpoint as ckpt
from gnn.files import write_bytes


@dataclass(frozen=True, kw_only=True)
class CheckpointConfig:
    """``directory``: the run's checkpoint folder; ``every``: checkpoint after every ``every``-th epoch; ``resume``:
    continue what the folder holds (otherwise a folder with a checkpoint is refused); ``fingerprint``: the settings
    a resume must share; ``crash_at_epoch`` / ``crash_marker``: fault injection for the restart tests (rank 1, or 0
    alone, raises once before that epoch of seed 0; the marker file records it)."""

    directory: Path
    every: int
    resume: bool = False
    fingerprint: dict = field(default_factory=dict)
    crash_at_epoch: int = -1
    crash_marker: str = ""

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError(f"CheckpointConfig: every={self.every}; checkpoint after every K >= 1 epochs")


@dataclass
class TrainState:
    """What an epoch loop carries besides model and optimizer: the next epoch, the best record, the epochs since it,
    the sign-flip generator and the weight average (or None)."""

    epoch: int
    best: dict
    since_best: int
    generator: torch.Generator
    ema: object | None = None


def _codec_modules(model: nn.Module) -> list[nn.Module]:
    """The attention modules that round halo K/V with their own generator (``graphtransformer.parallel``)."""
    return [m for m in model.modules() if hasattr(m, "codec_seed") and hasattr(m, "generator")]


class SeedCheckpoints:
    """Checkpoints of one seed's training (collective: every rank calls every method)."""

    def __init__(self, cfg: CheckpointConfig, seed: int) -> None:
        self.cfg, self.seed = cfg, seed
        self.ckdir = Path(cfg.directory) / f"seed{seed}"

    def done_record(self) -> dict | None:
        """The finished seed's record, or None."""
        path = self.ckdir / "done.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def finish(self, record: dict) -> None:
        """Mark the seed finished with its ``record`` (rank 0 writes, every rank waits)."""
        if dist.get_rank() == 0:
            self.ckdir.mkdir(parents=True, exist_ok=True)
            write_bytes(self.ckdir / "done.json", json.dumps(record).encode())
        dist.barrier()

    def resume(self, model: nn.Module, opt: torch.optim.Optimizer, state: TrainState,
               device: torch.device) -> bool:
        """Load the seed's last checkpoint into ``model``, ``opt`` and ``state`` (True), or leave them (False: none
        yet). A folder holding a checkpoint without ``resume`` is refused."""
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        manifest = ckpt.read_manifest(self.ckdir) if self.ckdir.exists() else None
        if manifest is None:
            return False
        if not self.cfg.resume:
            raise ckpt.CheckpointError(f"{self.ckdir} holds a checkpoint (epoch {manifest['epoch']}); pass --resume "
                                       "to continue it or choose an empty --checkpoint-dir")
        msd, osd = get_state_dict(model, opt)
        dcp_state = {"model": msd, "optim": osd}
        run = ckpt.load_step(self.ckdir, manifest, dcp_state, self.cfg.fingerprint)
        set_state_dict(model, opt, model_state_dict=dcp_state["model"], optim_state_dict=dcp_state["optim"])
        ckpt.set_rng_state(run["rng"], device)
        state.generator.set_state(run["sign_generator"])
        for m, s in zip(_codec_modules(model), run["codec_generators"], strict=True):
            if s is not None:
                m.generator = torch.Generator(device=device).manual_seed(0)
                m.generator.set_state(s)
        if state.ema is not None:
            for avg, saved in zip(state.ema.average, run["ema"], strict=True):
                avg.copy_(saved)
        state.epoch, state.best, state.since_best = run["epoch"] + 1, run["best"], run["since_best"]
        if dist.get_rank() == 0:
            print(f"seed {self.seed}: resumed from {self.ckdir / manifest['step']} at epoch {state.epoch}", flush=True)
        return True

    def save_if_due(self, epoch: int, model: nn.Module, opt: torch.optim.Optimizer, state: TrainState,
                    device: torch.device) -> None:
        """Checkpoint the end of ``epoch`` when it is an ``every``-th one."""
        from torch.distributed.checkpoint.state_dict import get_state_dict

        if (epoch + 1) % self.cfg.every:
            return
        msd, osd = get_state_dict(model, opt)
        run = {"epoch": epoch, "rank": dist.get_rank(), "rng": ckpt.rng_state(device),
               "sign_generator": state.generator.get_state(),
               "codec_generators": [None if m.generator is None else m.generator.get_state()
                                    for m in _codec_modules(model)],
               "ema": None if state.ema is None else [a.detach().clone() for a in state.ema.average],
               "best": dict(state.best), "since_best": state.since_best}
        ckpt.save_step(self.ckdir, epoch, {"model": msd, "optim": osd}, run, self.cfg.fingerprint)

    def maybe_crash(self, epoch: int) -> None:
        """Fault injection: rank 1 (or 0 alone) raises once before ``crash_at_epoch`` of seed 0."""
        cfg = self.cfg
        if (self.seed != 0 or epoch != cfg.crash_at_epoch or not cfg.crash_marker
                or dist.get_rank() != min(1, dist.get_world_size() - 1)):
            return
        marker = Path(cfg.crash_marker)
        if marker.exists():
            return
        marker.write_text(f"crashed at epoch {epoch}\n")
        print(f"injected crash at epoch {epoch} on rank {dist.get_rank()}", file=sys.stderr, flush=True)
        raise RuntimeError(f"injected crash at epoch {epoch}")


def ensure_process_group() -> bool:
    """A one-process gloo group for a single-process run that checkpoints (DCP and the manifest protocol are
    collectives); True when this call created it."""
    if dist.is_initialized():
        return False
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    return True


__all__ = ["CheckpointConfig", "SeedCheckpoints", "TrainState", "ensure_process_group"]
