"""Local multi-process launcher for tests and benchmarks: spawn ``world_size`` CPU ranks over gloo on a free
port, run a top-level function on each, and return every rank's result.

`torchrun ... -m distributed.train` is the production launcher; this one exists so that pytest and benchmark
scripts can start ranks without a shell. Every rank ends through `distributed.teardown` (barrier on every group,
groups destroyed, ``os._exit``), so a finished rank cannot abort in interpreter shutdown. A rank that fails is
reported with its exit status (the signal's name when one killed it), its traceback and the tail of its stderr;
the other ranks are stopped after a grace period instead of waiting forever on the dead one.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from multiprocessing.connection import wait as wait_for
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from distributed.teardown import exit_process, finish_process_groups

GRACE_S = 20.0  # how long the other ranks may take to notice a dead peer before they are killed
STDERR_TAIL_LINES = 30
STORE_TIMEOUT_S = 120


def free_port() -> int:
    """A port that was free a moment ago. Racy (another process may bind it before its user does): only for a
    port inside a private network namespace, where no other test can take it; otherwise host a store on port 0
    (`host_store`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_store(world_size: int, host: str = "127.0.0.1") -> dist.TCPStore:
    """A TCPStore bound by this process on a port the kernel picks (port 0) and held open while the ranks run,
    so no concurrent job can take the port between choosing it and binding it (`free_port`'s race)."""
    return dist.TCPStore(host, 0, world_size, is_master=True, wait_for_workers=False,
                         timeout=timedelta(seconds=STORE_TIMEOUT_S))


def init_group(rank: int, world_size: int, port: int, backend: str = "gloo", timeout_s: float = 120,
               master_addr: str = "127.0.0.1", store_hosted: bool = False) -> None:
    """Join the gloo group at ``master_addr:port``. ``store_hosted``: the launcher already serves the store there
    (`host_store`), every rank is a client; otherwise rank 0 binds it (env:// rendezvous)."""
    timeout = timedelta(seconds=timeout_s)
    if store_hosted:
        store = dist.TCPStore(master_addr, port, world_size, is_master=False, timeout=timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
        return
    os.environ.update(MASTER_ADDR=master_addr, MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=timeout)


class RankFailure(RuntimeError):
    """One or more spawned ranks failed; the message names each with its status, traceback and stderr tail."""


def _save(obj, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)  # the parent never reads half a result


def _worker(rank: int, fn, world_size: int, port: int, out_dir: str, threads: int, args: tuple,
            rank_setup=None, master_addr: str = "127.0.0.1", store_hosted: bool = False) -> None:
    out = Path(out_dir)
    err = open(out / f"rank{rank}.stderr", "w")  # noqa: SIM115 - fd 2 keeps it open until os._exit
    os.dup2(err.fileno(), 2)  # C++ messages (std::terminate, gloo) land here too
    code = 1
    try:
        torch.set_num_threads(threads)
        if rank_setup is not None:
            rank_setup(rank)
        init_group(rank, world_size, port, master_addr=master_addr, store_hosted=store_hosted)
        result = fn(*args)
        _save({"ok": True, "result": result}, out / f"rank{rank}.pt")
        code = 0
    except BaseException:  # noqa: BLE001 - reported to the parent with the traceback
        traceback.print_exc()
        _save({"ok": False, "error": traceback.format_exc()}, out / f"rank{rank}.pt")
    try:
        finish_process_groups(wait=code == 0)
    except Exception:  # noqa: BLE001 - a peer died while this rank tore down
        traceback.print_exc()
        code = code or 1
    exit_process(code)


def _status(code: int, killed: bool) -> str:
    if killed:
        return "still running, killed by the launcher (timeout, or grace period after another rank failed)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _report(world_size: int, codes: list[int], killed: set[int], out: Path) -> str:
    lines = []
    for r, code in enumerate(codes):
        if code == 0:
            continue
        lines.append(f"rank {r}: {_status(code, r in killed)}")
        blob = out / f"rank{r}.pt"
        if blob.exists():
            saved = torch.load(blob, weights_only=False)  # written by our own rank into our private temp dir
            if not saved["ok"]:
                lines.append(saved["error"].rstrip())
        stderr = out / f"rank{r}.stderr"
        if not stderr.exists():  # killed before it opened the file
            lines.append(f"--- rank {r} has no stderr file: it died before opening it ---")
            continue
        tail = stderr.read_text(errors="replace").splitlines()[-STDERR_TAIL_LINES:]
        if tail:
            lines.append(f"--- rank {r} stderr (last {len(tail)} lines) ---")
            lines.extend(tail)
    return f"{sum(c != 0 for c in codes)} of {world_size} ranks failed:\n" + "\n".join(lines)


def _join(procs: list, timeout_s: float | None) -> set[int]:
    """Wait for every process; after the first failure give the rest ``GRACE_S``, then kill what still runs.
    Returns the indices of the processes it killed."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    running = list(procs)
    while running:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        wait_for([p.sentinel for p in running], timeout=left)
        for p in [p for p in running if not p.is_alive()]:
            p.join()
            running.remove(p)
            if p.exitcode != 0 and (deadline is None or deadline > time.monotonic() + GRACE_S):
                deadline = time.monotonic() + GRACE_S
        if running and deadline is not None and time.monotonic() >= deadline:
            for p in running:
                p.kill()
                p.join()
            return {procs.index(p) for p in running}
    return set()


def spawn(fn, world_size: int, *args, threads: int = 1, rank_setup=None, master_addr: str = "127.0.0.1",
          timeout_s: float | None = None) -> list:
    """Run ``fn(*args)`` on ``world_size`` gloo ranks (fn must be importable: a module-level function).

    ``rank_setup(rank)`` (picklable) runs in each rank before its process group starts, e.g.
    :meth:`distributed.shaped_network.ShapedNetwork.rank_setup` to move the rank into its network namespace; then
    ``master_addr`` must be rank 0's address there. ``timeout_s`` bounds the whole run (None: no bound). Returns
    the list of per-rank return values; raises `RankFailure` naming every failed rank. What the ranks wrote to
    stderr is copied to this process's stderr.
    """
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as out_dir:
        out = Path(out_dir)
        # Ranks in their own network namespaces (rank_setup) reach rank 0's address there, a port space no other
        # job shares; everywhere else this process holds the store, so the port cannot be taken from under it.
        store = None if rank_setup is not None else host_store(world_size, master_addr)
        port = free_port() if store is None else store.port
        procs = [ctx.Process(target=_worker, args=(r, fn, world_size, port, out_dir, threads, args, rank_setup,
                                                   master_addr, store is not None)) for r in range(world_size)]
        for p in procs:
            p.start()
        killed = _join(procs, timeout_s)
        codes = [p.exitcode for p in procs]
        if any(c != 0 for c in codes):
            raise RankFailure(_report(world_size, codes, killed, out))
        for r in range(world_size):
            text = (out / f"rank{r}.stderr").read_text(errors="replace")
            if text:
                sys.stderr.write(text)
        # Results are any picklable value, written by our own ranks into this private temp dir.
        return [torch.load(out / f"rank{r}.pt", weights_only=False)["result"] for r in range(world_size)]
