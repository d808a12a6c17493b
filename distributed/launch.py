"""Local multi-process launcher for tests and benchmarks: spawn ``world_size`` CPU ranks over gloo on a free
port, run a top-level function on each, and return every rank's result (child tracebacks are re-raised).

`torchrun ... -m distributed.train` is the production launcher; this one exists so that pytest and benchmark
scripts can start ranks without a shell.
"""

from __future__ import annotations

import os
import socket
import tempfile
import traceback
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_group(rank: int, world_size: int, port: int, backend: str = "gloo", timeout_s: float = 120,
               master_addr: str = "127.0.0.1") -> None:
    os.environ.update(MASTER_ADDR=master_addr, MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=timedelta(seconds=timeout_s))


def _worker(rank: int, fn, world_size: int, port: int, out_dir: str, threads: int, args: tuple,
            rank_setup=None, master_addr: str = "127.0.0.1") -> None:
    torch.set_num_threads(threads)
    try:
        if rank_setup is not None:
            rank_setup(rank)
        init_group(rank, world_size, port, master_addr=master_addr)
        result = fn(*args)
        torch.save({"ok": True, "result": result}, Path(out_dir) / f"rank{rank}.pt")
        dist.barrier()  # no rank tears gloo down while a peer still has asynchronous work in flight
    except BaseException:  # noqa: BLE001 - the parent re-raises it with the child traceback
        torch.save({"ok": False, "error": traceback.format_exc()}, Path(out_dir) / f"rank{rank}.pt")
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def spawn(fn, world_size: int, *args, threads: int = 1, rank_setup=None, master_addr: str = "127.0.0.1") -> list:
    """Run ``fn(*args)`` on ``world_size`` gloo ranks (fn must be importable: a module-level function).

    ``rank_setup(rank)`` (picklable) runs in each rank before its process group starts, e.g.
    :meth:`distributed.shaped_network.ShapedNetwork.rank_setup` to move the rank into its network namespace; then
    ``master_addr`` must be rank 0's address there. Returns the list of per-rank return values; raises RuntimeError
    with the first child traceback.
    """
    with tempfile.TemporaryDirectory() as out_dir:
        try:
            mp.spawn(_worker, args=(fn, world_size, free_port(), out_dir, threads, args, rank_setup, master_addr),
                     nprocs=world_size, join=True)
        except Exception as exc:  # noqa: BLE001
            for r in range(world_size):
                p = Path(out_dir) / f"rank{r}.pt"
                if p.exists():
                    blob = torch.load(p, weights_only=False)
                    if not blob["ok"]:
                        raise RuntimeError(f"rank {r} failed:\n{blob['error']}") from exc
            raise
        return [torch.load(Path(out_dir) / f"rank{r}.pt", weights_only=False)["result"]
                for r in range(world_size)]
