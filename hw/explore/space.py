"""A design space over `AcceleratorConfig` fields and its sampling (full grid or seeded random draws from the grid).

A space file is TOML::

    base = "mega"          # preset the unlisted fields come from
    sampler = "random"     # "grid" (every combination) or "random" (seeded draws without replacement)
    samples = 500          # random only: how many valid designs
    seed = 0
    [fields]
    num_comb_tiles = [2, 4, 8]
    dram_bandwidth_gbs = [128, 256, 512]

Combinations that `AcceleratorConfig` refuses (e.g. ``num_agg_units`` not a multiple of ``agg_lanes``) are skipped
and counted, never evaluated; random sampling keeps drawing until it has ``samples`` valid designs or the grid is
exhausted. Without a file, :func:`default_space` varies every count, buffer, DRAM bandwidth and clock of the base
preset by x0.5 / x1 / x2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

from gnn.data.toml_file import read_toml
from hw.config import PRESETS, AcceleratorConfig, ConfigError, _typed, preset

SAMPLERS = ("grid", "random")
TUNABLE = {f.name: f.type for f in fields(AcceleratorConfig) if f.name not in ("name", "sources")}
# fields the built-in space scales by 0.5 / 1 / 2 around the base preset
DEFAULT_FIELDS = ("num_comb_tiles", "num_cpe_per_tile", "num_bse_per_cpe", "num_agg_units", "agg_lanes",
                  "num_decoders", "num_requant_units", "input_buffer_kib", "edge_buffer_kib", "weight_buffer_kib",
                  "combination_buffer_kib", "aggregation_buffer_kib", "sparse_buffer_kib", "dram_bandwidth_gbs",
                  "clock_ghz", "num_eid_fifos", "eid_fifo_depth")
MAX_GRID = 1_000_000  # a grid sweep beyond this is refused (use random sampling)
_PERMUTE_BELOW = 1 << 22  # grids up to this size are sampled by one seeded permutation, larger ones by rejection


class SpaceError(ConfigError):
    """A design space (file or flags) is invalid; the one-line message names the file and the field."""


@dataclass(frozen=True, kw_only=True)
class Space:
    """Fields to vary (``dims``: (field name, values) in sweep order) around preset ``base``, and how to sample."""

    base: str = "mega"
    dims: tuple[tuple[str, tuple], ...]
    sampler: str = "random"
    samples: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        if self.base not in PRESETS:
            raise SpaceError(f"space: base = {self.base!r} is not a preset; valid: {sorted(PRESETS)}")
        if not self.dims:
            raise SpaceError("space: no fields to vary; list at least one under [fields]")
        for name, values in self.dims:
            if name not in TUNABLE:
                raise SpaceError(f"space: unknown accelerator field {name!r}; valid: {sorted(TUNABLE)}")
            if not values:
                raise SpaceError(f"space: field {name} has no values")
            if len(set(values)) != len(values):
                raise SpaceError(f"space: field {name} repeats a value: {list(values)}")
        if self.sampler not in SAMPLERS:
            raise SpaceError(f"space: sampler = {self.sampler!r} is unknown; valid: {SAMPLERS}")
        if self.samples < 1:
            raise SpaceError(f"space: samples = {self.samples} must be >= 1")

    @property
    def grid_size(self) -> int:
        """Number of combinations of the listed values (valid or not)."""
        return math.prod(len(v) for _, v in self.dims)


def default_space(base: str = "mega", sampler: str = "random", samples: int = 64, seed: int = 0) -> Space:
    """Every field of :data:`DEFAULT_FIELDS` at x0.5, x1 and x2 its value in preset ``base`` (ints rounded)."""
    cfg = preset(base)
    dims = []
    for name in DEFAULT_FIELDS:
        v = getattr(cfg, name)
        dims.append((name, (type(v)(v / 2) if isinstance(v, float) else max(1, v // 2), v, v * 2)))
    return Space(base=base, dims=tuple(dims), sampler=sampler, samples=samples, seed=seed)


def load_space(path: str | Path) -> Space:
    """The space of a TOML file (module docstring); any problem is a one-line `SpaceError` naming the file."""
    data = read_toml(path, SpaceError, "design space")
    unknown = sorted(set(data) - {"base", "sampler", "samples", "seed", "fields"})
    if unknown:
        raise SpaceError(f"{path}: unknown keys {unknown}; valid: base, sampler, samples, seed, [fields]")
    table = data.get("fields", {})
    if not isinstance(table, dict):
        raise SpaceError(f"{path}: fields must be a table ([fields]), not {type(table).__name__}")
    dims = []
    for name, values in table.items():
        if name not in TUNABLE:
            raise SpaceError(f"{path}: unknown accelerator field {name!r} in [fields]; valid: {sorted(TUNABLE)}")
        values = values if isinstance(values, list) else [values]
        try:
            dims.append((name, tuple(_typed(path, name, v, TUNABLE[name]) for v in values)))
        except ConfigError as e:
            raise SpaceError(str(e)) from None
    for key, kind in (("samples", int), ("seed", int), ("sampler", str), ("base", str)):
        if key in data and type(data[key]) is not kind:
            raise SpaceError(f"{path}: {key} = {data[key]!r} must be {'an int' if kind is int else 'a string'}")
    try:
        return Space(dims=tuple(dims), **{k: data[k] for k in ("base", "sampler", "samples", "seed") if k in data})
    except SpaceError as e:
        raise SpaceError(f"{path}: {e}") from None


def _decode(space: Space, index: int) -> dict:
    """Grid point ``index`` (mixed radix, last field fastest) as {field: value}."""
    values = {}
    for name, choices in reversed(space.dims):
        index, r = divmod(index, len(choices))
        values[name] = choices[r]
    return {name: values[name] for name, _ in space.dims}


def _indices(space: Space):
    """Grid indices in sampling order: all in order (grid), or a seeded random order without repetition."""
    n = space.grid_size
    if space.sampler == "grid":
        yield from range(n)
        return
    rng = np.random.default_rng(space.seed)
    if n <= _PERMUTE_BELOW:
        yield from (int(i) for i in rng.permutation(n))
        return
    seen: set[int] = set()
    while len(seen) < n:  # a huge grid: rejection of repeats (never exhausted in practice)
        i = int(rng.integers(n))
        if i not in seen:
            seen.add(i)
            yield i


def sample(space: Space) -> tuple[list[AcceleratorConfig], int]:
    """(designs in sampling order, number of combinations skipped because `AcceleratorConfig` refused them).

    Grid: every valid combination; random: the first ``samples`` valid ones of a seeded order of the grid (the
    same seed gives the same designs)."""
    if space.sampler == "grid" and space.grid_size > MAX_GRID:
        raise SpaceError(f"space: the grid has {space.grid_size} points (> {MAX_GRID}); use sampler = \"random\" "
                         "or fewer values")
    base = preset(space.base)
    designs, invalid = [], 0
    for index in _indices(space):
        try:
            designs.append(replace(base, name=f"{space.base}-dse", **_decode(space, index)))
        except ConfigError:
            invalid += 1
            continue
        if space.sampler == "random" and len(designs) == space.samples:
            break
    return designs, invalid
