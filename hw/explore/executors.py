"""Where a sweep's design points run: in this process, in a local process pool (default), or on a Ray cluster.

Every executor has one method, ``imap_unordered(fn, tasks)``: it yields ``fn(task)`` for every task as each one
finishes, in any order, so the sweep caches each point the moment it is done. ``fn`` must be a module-level
function of one picklable argument (:func:`hw.explore.evaluate.evaluate`); each task carries its own cache key, so
results need no ordering. One task = one design on one workload: an interrupt then loses only unfinished points
(on a Ctrl-C the pools first hand over the results that finished while they waited, then re-raise).
``close()`` drops the tasks not yet started (a Ctrl-C ends the sweep promptly).

Dask is not offered: this project's top-level ``distributed`` package shadows ``dask.distributed``.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs ``fn`` over tasks and streams results as they finish."""

    workers: int

    def imap_unordered(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[R]: ...

    def warm_up(self) -> None: ...

    def close(self) -> None: ...


class InProcessExecutor:
    """Runs every task here, one after the other (the reference, and the cheapest for a handful of points)."""

    workers = 1

    def imap_unordered(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[R]:
        return (fn(t) for t in tasks)

    def warm_up(self) -> None:
        pass

    def close(self) -> None:
        pass


class LocalProcessExecutor:
    """A pool of ``workers`` spawned processes (spawn: no forked copy of the parent's threads or open files);
    each runs ``initializer(initarg)`` once at start (the sweep ships its built workloads that way, so no worker
    rebuilds a dataset). At most ``2 * workers`` tasks are in flight, so a Ctrl-C leaves little queued work."""

    def __init__(self, workers: int, initializer: Callable | None = None, initarg: object = None) -> None:
        if workers < 1:
            raise ValueError(f"LocalProcessExecutor: workers={workers} must be >= 1")
        self.workers = workers
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=initializer, initargs=() if initializer is None else (initarg,))

    def imap_unordered(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[R]:
        todo, running = list(reversed(tasks)), set()
        while todo or running:
            while todo and len(running) < 2 * self.workers:
                running.add(self._pool.submit(fn, todo.pop()))
            try:
                done, running = wait(running, return_when=FIRST_COMPLETED)
            except KeyboardInterrupt:  # hand over what finished meanwhile, then stop
                yield from (f.result() for f in running if f.done() and not f.cancelled() and f.exception() is None)
                raise
            for future in done:
                yield future.result()

    def warm_up(self) -> None:
        """Return once every worker has started and run its initializer (so a sweep can time start-up apart)."""
        for future in [self._pool.submit(time.sleep, 0.2) for _ in range(self.workers)]:
            future.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class RayExecutor:
    """Tasks as Ray remote functions (``pip install -e .[ray]``) on the cluster at ``address`` (None: a local
    Ray started here with ``num_cpus``; ``"auto"``: the running cluster). One CPU per task; at most
    ``2 * workers`` in flight, ``workers`` = the cluster's CPUs. ``initarg`` goes to the object store once
    (``ray.put``) and every task calls ``initializer(initarg)`` first, which must be cheap when repeated (the
    sweep's installs each workload once per worker process; nodes need not see the export files). Only shuts Ray
    down if it started it."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None, initializer: Callable | None = None,
                 initarg: object = None) -> None:
        import ray  # optional extra: imported only when asked for

        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            ray.init(address=address, num_cpus=num_cpus if address is None else None, include_dashboard=False,
                     log_to_driver=False)
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._initializer, self._initarg = initializer, ray.put(initarg)

    def imap_unordered(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[R]:
        remote = self._ray.remote(num_cpus=1)(_initialized_call)
        todo, running = list(reversed(tasks)), []
        while todo or running:
            while todo and len(running) < 2 * self.workers:
                running.append(remote.remote(self._initializer, self._initarg, fn, todo.pop()))
            try:
                done, running = self._ray.wait(running, num_returns=1)
            except KeyboardInterrupt:  # hand over what finished meanwhile, then stop
                ready, _ = self._ray.wait(running, num_returns=len(running), timeout=0)
                yield from self._ray.get(ready)
                raise
            for ref in done:
                yield self._ray.get(ref)

    def warm_up(self) -> None:
        """Return once ``workers`` tasks have run their initializer (Ray starts worker processes lazily)."""
        remote = self._ray.remote(num_cpus=1)(_initialized_call)
        self._ray.get([remote.remote(self._initializer, self._initarg, time.sleep, 0.2) for _ in range(self.workers)])

    def close(self) -> None:
        if self._owns:
            self._ray.shutdown()


def _initialized_call(initializer: Callable | None, initarg: object, fn: Callable[[T], R], task: T) -> R:
    """``fn(task)`` after ``initializer(initarg)`` (a Ray task's body)."""
    if initializer is not None:
        initializer(initarg)
    return fn(task)


def make_executor(kind: str, workers: int, address: str | None = None, initializer: Callable | None = None,
                  initarg: object = None) -> Executor:
    """``"inprocess"``, ``"local"`` (a pool of ``workers`` processes; 1 worker runs in-process) or ``"ray"``;
    ``initializer(initarg)`` runs in every worker before its tasks (in-process: the caller's state is already
    there, so it is not called)."""
    if kind == "inprocess" or (kind == "local" and workers == 1):
        return InProcessExecutor()
    if kind == "local":
        return LocalProcessExecutor(workers, initializer, initarg)
    if kind == "ray":
        return RayExecutor(address=address, num_cpus=workers, initializer=initializer, initarg=initarg)
    raise ValueError(f"unknown executor {kind!r}; valid: inprocess, local, ray")
