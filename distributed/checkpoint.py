"""Crash-consistent checkpoints of a distributed run: fresh step directories, atomic per-rank files, a hashed
manifest that switches a step in.

Layout of a checkpoint directory D::

    D/latest.json         the manifest: step, epoch, world size, run config, SHA-256 of every file of the step
    D/step-<epoch>/       torch.distributed.checkpoint files (model + optimizer) and rank-<r>.pt of every rank

Why: DCP rewrites its data files in place and replaces only ``.metadata`` atomically, so a rank that died before
writing its shard left a directory that mixed two epochs and loaded silently. Here a step is written into its own
directory; every rank writes its DCP shard and its run state (`capture_run_state`: RNG states, halo-exchange
state, layer 0's input halo rows, best record, history) with temp file + fsync + ``os.replace``; after a barrier
rank 0 hashes the step's files and replaces ``latest.json`` (the switch), then removes every other step directory.
A kill at any moment leaves ``latest.json`` naming a complete step, or no manifest at all. `load_step` checks the
manifest (world size, config, the SHA-256 of every file: `CheckpointError` naming the file) before it loads
anything; step directories the manifest does not name are partial writes and are removed.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from gnn.files import sha256_file, write_bytes

MANIFEST = "latest.json"
FORMAT = 1
_STEP_RE = re.compile(r"step-\d+")


class CheckpointError(RuntimeError):
    """A checkpoint that must not be loaded (missing or corrupt file, other run), or a directory in the way."""


def step_name(epoch: int) -> str:
    return f"step-{epoch}"


def rank_file(rank: int) -> str:
    return f"rank-{rank}.pt"


# --- files -------------------------------------------------------------------------------------------------------
def save_atomic(obj, path: Path) -> None:
    """`torch.save` through `gnn.files.write_bytes`."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    write_bytes(path, buf.getvalue())


def step_digests(ckdir: Path, step: str) -> dict[str, str]:
    """``"step-E/<file>"`` -> SHA-256 of every file of a step directory (sorted)."""
    root = ckdir / step
    return {p.relative_to(ckdir).as_posix(): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


# --- manifest ----------------------------------------------------------------------------------------------------
def make_manifest(ckdir: Path, epoch: int, world_size: int, config: dict) -> dict:
    step = step_name(epoch)
    return {"format": FORMAT, "step": step, "epoch": epoch, "world_size": world_size, "config": config,
            "files": step_digests(ckdir, step)}


def write_manifest(ckdir: Path, manifest: dict) -> None:
    write_bytes(ckdir / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())


def read_manifest(ckdir: Path) -> dict | None:
    """The manifest of ``ckdir``; None when it has none. A DCP checkpoint of the old flat layout (``.metadata`` in
    ``ckdir`` itself) or an unreadable manifest raise `CheckpointError`: neither may be skipped silently."""
    path = ckdir / MANIFEST
    if not path.exists():
        if (ckdir / ".metadata").exists():
            raise CheckpointError(f"{ckdir} holds a checkpoint of the old flat layout (no {MANIFEST}), which cannot "
                                  "be resumed exactly; remove it or choose another --checkpoint-dir")
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"checkpoint manifest {path} is unreadable ({exc}); remove {ckdir} to start over") \
            from None
    keys = {"format", "step", "epoch", "world_size", "config", "files"}
    if not isinstance(manifest, dict) or not keys <= manifest.keys() or manifest["format"] != FORMAT:
        raise CheckpointError(f"checkpoint manifest {path} is not a format-{FORMAT} manifest (keys "
                              f"{', '.join(sorted(keys))}); remove {ckdir} to start over")
    return manifest


def check_manifest(ckdir: Path, manifest: dict, world_size: int, config: dict) -> None:
    """Raise `CheckpointError` unless the step fits this run and every file has its recorded SHA-256."""
    if manifest["world_size"] != world_size:
        raise CheckpointError(f"checkpoint {ckdir / manifest['step']} was written by {manifest['world_size']} ranks, "
                              f"this run has {world_size}; launch {manifest['world_size']} ranks to resume it")
    changed = sorted(k for k in config.keys() | manifest["config"].keys()
                     if config.get(k) != manifest["config"].get(k))
    if changed:
        diff = "; ".join(f"{k}: {manifest['config'].get(k)!r} -> {config.get(k)!r}" for k in changed)
        raise CheckpointError(f"checkpoint {ckdir / manifest['step']} is of another run ({diff}); resume with the "
                              "same settings or use another --checkpoint-dir")
    for rel, want in sorted(manifest["files"].items()):
        path = ckdir / rel
        if not path.is_file():
            raise CheckpointError(f"checkpoint file {path} is missing (listed in {ckdir / MANIFEST}); refusing to "
                                  "resume from an incomplete checkpoint")
        got = sha256_file(path)
        if got != want:
            raise CheckpointError(f"checkpoint file {path} is corrupt: SHA-256 {got[:16]}... differs from "
                                  f"{want[:16]}... in {ckdir / MANIFEST}; refusing to resume from it")


def remove_stale(ckdir: Path, keep: str | None) -> list[str]:
    """Remove step directories other than ``keep`` (partial writes, superseded steps) and leftover temp files.
    Returns the removed names. Best effort: what a crash leaves is removed next time."""
    removed = []
    for p in sorted(ckdir.iterdir()) if ckdir.is_dir() else []:
        if p.is_dir() and _STEP_RE.fullmatch(p.name) and p.name != keep:
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
        elif p.is_file() and p.name.startswith(f".{MANIFEST}.tmp-"):  # a manifest write cut short
            p.unlink(missing_ok=True)
            removed.append(p.name)
    return removed


# --- per-rank run state ------------------------------------------------------------------------------------------
def rng_state(device: torch.device) -> dict:
    """This process's torch (and CUDA), NumPy and Python RNG states as tensors and plain data."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()  # noqa: NPY002 - the global state others use
    version, internal, gauss_next = random.getstate()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
            "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
            "python": {"version": version, "state": list(internal), "gauss_next": gauss_next}}


def set_rng_state(state: dict, device: torch.device) -> None:
    """Inverse of `rng_state`."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] is not None:
        torch.cuda.set_rng_state(state["cuda"], device)
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"],  # noqa: NPY002
                         n["has_gauss"], n["cached_gaussian"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss_next"]))


class ResolvedTransfer:
    """The decoded rows of a finished halo transfer, standing in for `distributed.halo.Transfer` (its
    ``result()``): a pending pipelined transfer becomes one at a checkpoint, in the running job and on resume."""

    def __init__(self, rows: Tensor) -> None:
        self.rows = rows

    def result(self) -> Tensor:
        return self.rows


def _copy(t: Tensor | None) -> Tensor | None:
    return None if t is None else t.detach().clone()


def exchanger_state(ex) -> dict:
    """A `HaloExchanger`'s state: delta references, last halo, and the pipelined transfers in flight, which are
    waited for and kept decoded (in ``ex`` too, so the job that goes on and a resumed one use the same rows)."""
    if ex.pending_fwd is not None and not isinstance(ex.pending_fwd[0], ResolvedTransfer):
        ex.pending_fwd = (ResolvedTransfer(ex.pending_fwd[0].result()), ex.pending_fwd[1])
    if ex.pending_bwd is not None and not isinstance(ex.pending_bwd, ResolvedTransfer):
        ex.pending_bwd = ResolvedTransfer(ex.pending_bwd.result())
    fwd, bwd = ex.pending_fwd, ex.pending_bwd
    return {"ref_send": _copy(ex.ref_send), "ref_recv": _copy(ex.ref_recv), "last_halo": _copy(ex.last_halo),
            "pending_fwd": None if fwd is None else _copy(fwd[0].rows),
            "pending_fwd_refresh": None if fwd is None else bool(fwd[1]),
            "pending_bwd": None if bwd is None else _copy(bwd.rows),
            "prev_sent": _copy(ex.prev_sent), "drift": ex.drift,
            "smooth_fwd": _copy(ex.smooth_fwd), "smooth_bwd": _copy(ex.smooth_bwd)}


def load_exchanger_state(ex, state: dict, device: torch.device) -> None:
    """Inverse of `exchanger_state`."""
    def to(t):
        return None if t is None else t.to(device)

    ex.ref_send, ex.ref_recv, ex.last_halo = to(state["ref_send"]), to(state["ref_recv"]), to(state["last_halo"])
    fwd, bwd = to(state["pending_fwd"]), to(state["pending_bwd"])
    ex.pending_fwd = None if fwd is None else (ResolvedTransfer(fwd), state["pending_fwd_refresh"])
    ex.pending_bwd = None if bwd is None else ResolvedTransfer(bwd)
    ex.prev_sent, ex.drift = to(state.get("prev_sent")), tuple(state.get("drift", (0.0, 0.0)))
    ex.smooth_fwd, ex.smooth_bwd = to(state.get("smooth_fwd")), to(state.get("smooth_bwd"))


def partition_digest(owned: Tensor) -> str:
    """SHA-256 of this rank's owned global node ids: a resumed run must own the same nodes."""
    return hashlib.sha256(owned.detach().cpu().to(torch.int64).numpy().tobytes()).hexdigest()


def capture_run_state(model, epoch: int, best: dict, history: list[dict], device: torch.device) -> dict:
    """Everything of this rank beyond model + optimizer that the next epochs depend on (a `DistGNN` ``model``)."""
    return {"epoch": epoch, "rank": model.part.rank, "partition": partition_digest(model.part.owned),
            "rng": rng_state(device), "rounding_generator": model.generator.get_state(),
            "dq_mask_generator": model.shard.mask_generator.get_state() if model.shard is not None else None,
            "exchangers": [exchanger_state(ex) for ex in model.exchangers],
            "input_halo": _copy(model.input_halo),  # layer 0's input halo rows: a resumed run does not resend them
            "staleness": model.adaptor.state_dict() if model.adaptor is not None else None,
            "best": dict(best), "history": [dict(r) for r in history]}


def restore_run_state(model, state: dict, device: torch.device) -> None:
    """Inverse of `capture_run_state` (after the model was rebuilt identically); checks the partition."""
    if state["partition"] != partition_digest(model.part.owned):
        raise CheckpointError(f"rank {model.part.rank} owns other nodes than when the checkpoint was written (the "
                              "partition changed: METIS version or partition cache); resume is not exact, use "
                              "another --checkpoint-dir")
    set_rng_state(state["rng"], device)
    model.generator.set_state(state["rounding_generator"])
    if model.shard is not None:
        model.shard.mask_generator.set_state(state["dq_mask_generator"])
    for ex, s in zip(model.exchangers, state["exchangers"], strict=True):
        load_exchanger_state(ex, s, device)
    if model.adaptor is not None:
        model.adaptor.load_state_dict(state["staleness"])
    if state.get("input_halo") is not None:  # the next forward adopts it instead of exchanging the input again
        model.module.convs[0].input_halo = state["input_halo"].to(device)


# --- the collective protocol -------------------------------------------------------------------------------------
def save_step(ckdir: Path, epoch: int, dcp_state: dict, run_state: dict, config: dict,
              before_switch: Callable[[], None] | None = None) -> None:
    """Collective: write step ``epoch`` (DCP ``dcp_state`` + this rank's ``run_state``) and switch it in."""
    import torch.distributed.checkpoint as dcp

    rank, world = dist.get_rank(), dist.get_world_size()
    step = ckdir / step_name(epoch)
    if rank == 0:
        current = read_manifest(ckdir) if ckdir.exists() else None
        if current is not None and current["step"] == step.name:
            raise CheckpointError(f"{step} is the current checkpoint of {ckdir}; a run that starts over must use "
                                  "an empty --checkpoint-dir")
        shutil.rmtree(step, ignore_errors=True)  # a partial write of an earlier attempt
        step.mkdir(parents=True)
    dist.barrier()
    dcp.save(dcp_state, checkpoint_id=str(step))
    save_atomic(run_state, step / rank_file(rank))
    if before_switch is not None:
        before_switch()
    dist.barrier()  # every rank's files are durable
    if rank == 0:
        write_manifest(ckdir, make_manifest(ckdir, epoch, world, config))
        remove_stale(ckdir, keep=step.name)


def load_step(ckdir: Path, manifest: dict, dcp_state: dict, config: dict) -> dict:
    """Verify ``manifest``'s step (`check_manifest`), load it into ``dcp_state`` (in place) and return this rank's
    run state (``weights_only=True``). Every rank checks every file, so all ranks fail alike. Collective."""
    import torch.distributed.checkpoint as dcp

    rank = dist.get_rank()
    check_manifest(ckdir, manifest, dist.get_world_size(), config)
    dcp.load(dcp_state, checkpoint_id=str(ckdir / manifest["step"]))
    state = torch.load(ckdir / manifest["step"] / rank_file(rank), map_location="cpu", weights_only=True)
    if state["epoch"] != manifest["epoch"] or state["rank"] != rank:
        raise CheckpointError(f"{ckdir / manifest['step'] / rank_file(rank)} holds epoch {state['epoch']} of rank "
                              f"{state['rank']}, the manifest names epoch {manifest['epoch']} of rank {rank}")
    if rank == 0:
        remove_stale(ckdir, keep=manifest["step"])
    return state
