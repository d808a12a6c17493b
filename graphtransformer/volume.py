"""Closed-form communication volume of one attention layer per rank, for every sequence-parallel layout.

Pure functions of the layout's sizes (and, for the halo layout, its :class:`~graphtransformer.comm.HaloPlan`); the
bytes :class:`~graphtransformer.comm.CommCounter` logs in a real run equal them (tests/graphtransformer). Forward
phase, bytes this rank sends to other ranks. ``n`` = rows per rank, H heads of width D, ``elem_bytes`` per value.

* Ulysses (head-parallel degree ``hp``): q, k, v go sequence -> heads and the output heads -> sequence, each an
  all-to-all keeping 1/hp of the tensor local: 4 H n D (hp - 1) / hp values.
* Ring (context-parallel degree ``cp``, after Ulysses over ``hp``): this rank's K/V block of B = hp n rows for H / hp
  heads travels cp - 1 hops: (cp - 1) 2 (H / hp) B D values.
* Halo (sparse layers): one K and one V row of all heads per node that a remote rank needs, ``row_bytes`` each
  (``4 H D`` in fp32, or a :mod:`distributed.codecs` row).
"""

from __future__ import annotations

from graphtransformer.comm import HaloPlan


def ulysses_forward_bytes(n: int, heads: int, head_dim: int, hp: int, elem_bytes: int = 4) -> int:
    return 4 * heads * n * head_dim * elem_bytes * (hp - 1) // hp


def ring_forward_bytes(n: int, heads: int, head_dim: int, cp: int, hp: int = 1, elem_bytes: int = 4) -> int:
    return (cp - 1) * 2 * (heads // hp) * (hp * n) * head_dim * elem_bytes


def dense_forward_bytes(n: int, heads: int, head_dim: int, cp: int, hp: int, elem_bytes: int = 4) -> int:
    """A dense layer (and a sparse one with ``sparse_comm="ring"``): Ulysses over hp, then the ring over cp."""
    return (ulysses_forward_bytes(n, heads, head_dim, hp, elem_bytes)
            + ring_forward_bytes(n, heads, head_dim, cp, hp, elem_bytes))


def halo_forward_bytes(plan: HaloPlan, row_bytes: int) -> int:
    """K and V rows (``row_bytes`` each) of every node this rank sends: 2 row_bytes per sent node."""
    return 2 * row_bytes * sum(plan.send_counts)
