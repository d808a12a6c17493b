"""Rank functions for the launcher tests (spawned ranks import them through the sys.path entry of conftest.py)."""

import os
import signal
import sys

import torch
import torch.distributed as dist

HELD = []  # groups kept alive past destroy_process_group(), as FSDP2's DeviceMesh keeps its groups


def leave_async_work_in_flight(rounds: int) -> float:
    """Post all-reduces on a subgroup and on the default group without waiting, keep both groups referenced, and
    return: the pattern that killed ranks in interpreter shutdown (gloo threads outliving destroy_process_group,
    dropping the last reference to a tensor whose Python object C++ preserved). Each tensor carries an attribute,
    so its Python object is preserved. Returns the value this rank contributed."""
    group = dist.new_group(backend="gloo")
    HELD.extend([group, dist.distributed_c10d._get_default_group()])
    for _ in range(rounds):
        for g in (group, None):
            t = torch.full((1 << 16,), float(dist.get_rank() + 1))
            t.tag = "preserved"
            dist.all_reduce(t, group=g, async_op=True)
    return float(dist.get_rank() + 1)


def abort_on_rank(rank: int) -> int:
    """``rank`` writes a line to stderr and dies of SIGABRT; the others return their rank."""
    if dist.get_rank() == rank:
        print("rank about to abort", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGABRT)
    return dist.get_rank()


def raise_on_rank(rank: int) -> int:
    if dist.get_rank() == rank:
        raise ValueError(f"deliberate failure on rank {rank}")
    return dist.get_rank()


def warn_to_stderr() -> int:
    print(f"note from rank {dist.get_rank()}", file=sys.stderr, flush=True)
    return dist.get_rank()


def agree_on_input_codec() -> str:
    """Rank 0 holds binary rows (int1 alone would do), rank 1 rows of 0..3 (int2 alone would do, but int2's grid
    misses rank 0's 1): the narrowest codec exact on both is fp16."""
    from distributed.codecs import exact_codecs
    from distributed.parallelize import agree_on_codec

    g = torch.Generator().manual_seed(dist.get_rank())
    top = 1 if dist.get_rank() == 0 else 3
    rows = torch.randint(0, top + 1, (20, 9), generator=g).float()
    rows[:, 0] = top  # every row spans 0..top
    rows[:, 1] = 0
    return agree_on_codec(exact_codecs([rows], torch.float32))
