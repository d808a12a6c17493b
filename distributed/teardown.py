"""How a rank process ends: wait for every group's work, destroy the groups, then leave without interpreter shutdown.

Why not a plain return: gloo runs collectives on worker threads that outlive ``destroy_process_group()`` while
FSDP2 / DeviceMesh objects still hold their groups. When such a thread drops the last reference to a finished
work's tensor during ``Py_FinalizeEx``, it must take the GIL, CPython ends the thread with ``pthread_exit``
through a ``noexcept`` frame, and the process dies of ``std::terminate`` (SIGABRT, "terminate called without an
active exception"), after the rank's result was written. A barrier on every group (in creation order, the same
on every rank, so no two ranks wait on each other) completes all work queued before it, so no peer is cut off
mid-transfer; ``os._exit`` after flushing then ends the process with no finalization for a thread to race.

`finish_process_groups` + `exit_process` end spawned workers (`distributed.launch`); `run_rank_main` wraps the
``__main__`` of the torchrun entry points (``distributed.train``, ``graphtransformer.train``).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

import torch.distributed as dist
from torch.distributed import distributed_c10d


def _live_groups() -> list:
    """Every process group this rank belongs to, default group first, in creation order (identical on all ranks).
    Reads c10d's registry (``_world.pg_map``, private: checked by tests/distributed/test_teardown.py)."""
    return [pg for pg in distributed_c10d._world.pg_map if pg is not None]


def finish_process_groups(wait: bool = True) -> None:
    """Barrier on every group this rank belongs to (``wait``), then destroy them all.

    ``wait=False`` on an error path: a peer may never reach the barriers, and a failed rank must not hang; its
    peers then fail on the closed connection or on their collective timeout."""
    if not dist.is_initialized():
        return
    if wait:
        for group in _live_groups():
            dist.barrier(group=group)
    dist.destroy_process_group()


def exit_process(code: int) -> NoReturn:
    """Flush Python's streams and end the process now with ``code`` (no atexit handlers, no finalization)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream has nothing left to flush
            pass
    os._exit(code)


def exit_code(exc: SystemExit) -> int:
    """The status Python would give ``exc``: None -> 0, int -> itself, anything else printed to stderr -> 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def run_rank_main(main: Callable[[], int | None]) -> NoReturn:
    """Run a rank's ``main()`` as ``sys.exit(main())`` would, then `finish_process_groups` and `exit_process`."""
    try:
        code = main() or 0
    except SystemExit as exc:
        code = exit_code(exc)
    except BaseException:  # noqa: BLE001 - printed as Python would, then the rank still exits cleanly
        traceback.print_exc()
        code = 1
    try:
        finish_process_groups(wait=code == 0)
    except Exception:  # noqa: BLE001 - a peer died during teardown: report it, keep the exit code non-zero
        traceback.print_exc()
        code = code or 1
    exit_process(code)
