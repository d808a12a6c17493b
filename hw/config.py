"""`AcceleratorConfig`: one frozen, validated description of a GNN accelerator, its presets and TOML loading.

Presets (:func:`preset`): ``mega`` (MEGA, Zhu et al., HPCA 2024, as transcribed by a third party: see
:data:`SOURCES`), ``hygcn`` (HyGCN, Yan et al., HPCA 2020: aggregation-first, 32-bit, SIMD + systolic) and
``gcnax`` (GCNAX, Li et al., HPCA 2021: combination-first, 32-bit, 2-D tiling + fusion). The ablation variants of
MEGA (FP32 -> degree-aware bitmap -> + Adaptive-Package -> + Condense-Edge) are ``mega`` with fields replaced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from gnn.data.toml_file import read_toml

FEATURE_FORMATS = ("adaptive_package", "bitmap", "dense")
ORDERS = ("combination_first", "aggregation_first")
SOURCE_READS = ("condensed", "rows", "src_tiles")  # how aggregation fetches XW (or X) rows of its sources
KIB = 1024


class ConfigError(ValueError):
    """An accelerator configuration (preset fields or a TOML file) is invalid; the message names the field."""


# field -> provenance of the ``mega`` preset. "secondary" = transcribed by Mr-Xiao2021/HyGCN-... from arXiv
# 2311.09775 (not checked against the paper PDF); "assumption" = chosen here; "HyGCN" = the HyGCN paper's value.
SOURCES: dict[str, str] = {
    "clock_ghz": "secondary (MEGA 28 nm, 1 GHz)",
    "dram_bandwidth_gbs": "secondary (HBM 256 GB/s, as HyGCN)",
    "dram_access_bytes": "secondary (derived by the transcriber from the Condense-Edge example)",
    "dram_latency_cycles": "assumption (HBM ~100 ns order of magnitude)",
    "dram_num_banks": "assumption", "dram_row_bytes": "assumption", "dram_row_miss_cycles": "assumption",
    "num_comb_tiles": "secondary", "num_cpe_per_tile": "secondary", "num_bse_per_cpe": "secondary",
    "weight_bits": "secondary (4-bit weights)", "num_agg_units": "secondary (256 AUs)",
    "psum_bits": "secondary (16-bit partial sums)",
    "input_buffer_kib": "secondary", "edge_buffer_kib": "secondary", "weight_buffer_kib": "secondary",
    "combination_buffer_kib": "secondary", "aggregation_buffer_kib": "secondary", "sparse_buffer_kib": "secondary",
    "num_eid_fifos": "secondary (16 eID FIFOs)", "eid_fifo_depth": "secondary (8 entries)",
    "decoder_bits_per_cycle": "assumption (one 64-bit word per cycle)",
    "agg_lanes": "assumption (RTL aggregation_unit lane count)",
    "num_decoders": "assumption (one per C-PE; the aggregation side decodes XW packages with as many of its own, "
    "so the two phases never wait for each other's decoders, and the report's decoder row sums both sides: its "
    "busy + stall time can exceed the total cycles)",
    "num_requant_units": "assumption",
    "feature_format": "primary abstract (Adaptive-Package); layout per quant/formats/adaptive_package.py (assumption)",
    "condense_edge": "primary abstract (Condense-Edge); mechanics secondary",
    "requant_constants": "assumption (off: requantization constants factored and kept on chip, not streamed)",
    "edge_bytes": "assumption (a 32-bit source ID per edge)",
    "engine_buffers": "assumption (double-buffered tile queues)",
}


@dataclass(frozen=True, kw_only=True)
class AcceleratorConfig:
    """Accelerator parameters. Cycle unit = one clock at ``clock_ghz``; sizes in bytes / KiB as named."""

    name: str = "mega"
    clock_ghz: float = 1.0
    # off-chip memory (one HBM channel model)
    dram_bandwidth_gbs: float = 256.0
    dram_access_bytes: int = 128
    dram_latency_cycles: int = 100
    dram_num_banks: int = 16
    dram_row_bytes: int = 2048
    dram_row_miss_cycles: int = 28
    # combination engine: tiles x C-PEs x bit-serial engines (row-product); or MACs when feature_bits_override > 8
    num_comb_tiles: int = 4
    num_cpe_per_tile: int = 8
    num_bse_per_cpe: int = 32
    comb_bit_serial: bool = True
    weight_bits: int = 4
    # aggregation engine
    num_agg_units: int = 256
    agg_lanes: int = 16  # features per aggregation-unit beat (hw/rtl aggregation_unit LANES)
    psum_bits: int = 16
    num_decoders: int = 32
    num_requant_units: int = 16
    # buffers (KiB)
    input_buffer_kib: int = 64
    edge_buffer_kib: int = 24
    weight_buffer_kib: int = 48
    combination_buffer_kib: int = 96
    aggregation_buffer_kib: int = 128
    sparse_buffer_kib: int = 32
    # Condense-Edge unit
    num_eid_fifos: int = 16
    eid_fifo_depth: int = 8
    # dataflow / format
    order: str = "combination_first"
    feature_format: str = "adaptive_package"
    feature_bits_override: int = 0  # 0 = per-node degree-aware bits; 32 = FP32 features (baselines)
    condense_edge: bool = True
    source_reads: str = "condensed"
    decoder_bits_per_cycle: int = 64
    # what a tile moves besides its features, and how many tiles an engine holds (the RTL top: True, 8, 1)
    requant_constants: bool = False  # stream the export's per-(node, channel) constants (hw.requant_constants)
    edge_bytes: int = 4  # bytes per edge of the aggregation's edge stream (plus a 4-byte row pointer per row)
    engine_buffers: int = 2  # tiles a stage's output queue holds: 2 = double-buffered, 1 = single-buffered
    sources: dict = field(default_factory=lambda: dict(SOURCES), compare=False)

    def __post_init__(self) -> None:
        positive = [f.name for f in fields(self) if f.type in ("int", "float")
                    and f.name not in ("feature_bits_override", "dram_row_miss_cycles")]
        for name in positive:
            if not getattr(self, name) > 0:
                raise ConfigError(f"AcceleratorConfig({self.name}): {name}={getattr(self, name)} must be > 0 "
                                  f"(a zero {name} would stall the simulator forever)")
        if self.dram_row_miss_cycles < 0:
            raise ConfigError(f"AcceleratorConfig({self.name}): dram_row_miss_cycles={self.dram_row_miss_cycles} "
                              "must be >= 0")
        for name, value, valid in [("feature_format", self.feature_format, FEATURE_FORMATS),
                                   ("order", self.order, ORDERS), ("source_reads", self.source_reads, SOURCE_READS)]:
            if value not in valid:
                raise ConfigError(f"AcceleratorConfig: {name}={value!r} is unknown; valid: {valid}")
        if self.num_agg_units % self.agg_lanes:
            raise ConfigError(f"AcceleratorConfig: num_agg_units={self.num_agg_units} must be a multiple of "
                              f"agg_lanes={self.agg_lanes}")
        if self.feature_bits_override not in (0, 8, 16, 32):
            raise ConfigError("AcceleratorConfig: feature_bits_override must be 0 (degree-aware) or 8/16/32")
        if self.condense_edge != (self.source_reads == "condensed"):
            raise ConfigError("AcceleratorConfig: condense_edge=True needs source_reads='condensed' and vice versa")
        if self.dram_access_bytes & (self.dram_access_bytes - 1) or self.dram_row_bytes % self.dram_access_bytes:
            raise ConfigError("AcceleratorConfig: dram_access_bytes must be a power of two dividing dram_row_bytes")
        smallest = min(self.input_buffer_kib, self.combination_buffer_kib, self.sparse_buffer_kib) * KIB
        if self.feature_format == "adaptive_package" and smallest < 24:
            raise ConfigError(f"AcceleratorConfig: a buffer of {smallest} B is smaller than one 192-bit (24 B) "
                              "Adaptive-Package; give every feature buffer >= 1 KiB")
        if min(self.input_buffer_kib, self.aggregation_buffer_kib) * KIB < self.dram_access_bytes:
            raise ConfigError("AcceleratorConfig: input/aggregation buffers must hold at least one DRAM access")

    @property
    def bytes_per_cycle(self) -> float:
        """Peak DRAM bytes per clock (256 GB/s at 1 GHz = 256 B/cycle)."""
        return self.dram_bandwidth_gbs / self.clock_ghz

    @property
    def num_bse(self) -> int:
        return self.num_comb_tiles * self.num_cpe_per_tile * self.num_bse_per_cpe

    @property
    def buffer_bytes(self) -> dict[str, int]:
        names = ("input", "edge", "weight", "combination", "aggregation", "sparse")
        return {n: getattr(self, f"{n}_buffer_kib") * KIB for n in names}


def mega() -> AcceleratorConfig:
    return AcceleratorConfig()


def hygcn() -> AcceleratorConfig:
    """HyGCN-like (SECONDARY transcription): 32 SIMD16 cores (512 lanes), 4096-MAC systolic combination, 32-bit
    features, aggregation-first, window sliding/shrinking = fetch only referenced source rows. Buffers scaled to
    its 128 KB input / 2 MB edge / 2 MB weight / 16 MB aggregation (eDRAM) configuration."""
    return AcceleratorConfig(
        name="hygcn", order="aggregation_first", feature_format="dense", feature_bits_override=32,
        condense_edge=False, source_reads="rows", comb_bit_serial=False, num_comb_tiles=8, num_cpe_per_tile=4,
        num_bse_per_cpe=128, weight_bits=32, num_agg_units=512, psum_bits=32, input_buffer_kib=128,
        edge_buffer_kib=2048, weight_buffer_kib=2048, combination_buffer_kib=4096, aggregation_buffer_kib=16384,
        sparse_buffer_kib=1, sources={"*": "HyGCN HPCA 2020 as transcribed by Mr-Xiao2021 (SECONDARY)"})


def gcnax() -> AcceleratorConfig:
    """GCNAX-like: combination-first A(XW), 32-bit, 1024 MACs (assumption), fused XW tile on chip, 2-D tiles:
    a source tile is fetched whole when any edge of the destination tile touches it [UNCERTAIN details]."""
    return AcceleratorConfig(
        name="gcnax", feature_format="dense", feature_bits_override=32, condense_edge=False,
        source_reads="src_tiles", comb_bit_serial=False, num_comb_tiles=4, num_cpe_per_tile=8, num_bse_per_cpe=32,
        weight_bits=32, num_agg_units=1024, psum_bits=32, input_buffer_kib=128, edge_buffer_kib=64,
        weight_buffer_kib=256, combination_buffer_kib=256, aggregation_buffer_kib=512, sparse_buffer_kib=1,
        sources={"*": "GCNAX HPCA 2021; MAC count and buffers are assumptions (same order as MEGA's on-chip SRAM)"})


PRESETS = {"mega": mega, "hygcn": hygcn, "gcnax": gcnax}


def ablation_variants() -> dict[str, AcceleratorConfig]:
    """MEGA's ablation ladder: FP32 -> degree-aware bits (bitmap) -> +Adaptive-Package -> +Condense-Edge.

    The FP32 step is MEGA's engines with 32-bit features and 1024 MACs in place of the 1024 bit-serial engines
    (our stand-in for the paper's "HyGCN-C" baseline, whose exact definition we could not confirm)."""
    base = mega()
    fp32 = replace(base, name="fp32", feature_format="dense", feature_bits_override=32, condense_edge=False,
                   source_reads="rows", comb_bit_serial=False)  # 1024 32-bit MACs in place of the 1024 BSEs
    bitmap = replace(fp32, name="degree_aware_bitmap", feature_format="bitmap", feature_bits_override=0,
                     comb_bit_serial=True)
    ap = replace(bitmap, name="adaptive_package", feature_format="adaptive_package")
    return {"fp32": fp32, "degree_aware_bitmap": bitmap, "adaptive_package": ap,
            "condense_edge": replace(base, name="condense_edge")}


def preset(name: str) -> AcceleratorConfig:
    if name not in PRESETS:
        raise ConfigError(f"unknown accelerator preset {name!r}; valid: {sorted(PRESETS)}")
    return PRESETS[name]()


def load_config(path: str | Path, base: str = "mega") -> AcceleratorConfig:
    """Preset ``base`` overridden by the keys of a TOML file (top level or an ``[accelerator]`` table).

    Every problem (unreadable or malformed file, unknown key, wrong type, invalid value) is a `ConfigError`
    whose one-line message names the file and the field."""
    data = _accelerator_table(path, read_toml(path, ConfigError, "accelerator config"))
    base = data.pop("base", base)
    if not isinstance(base, str) or base not in PRESETS:
        raise ConfigError(f"{path}: base = {base!r} is not a preset; valid: {sorted(PRESETS)}")
    known = {f.name: f.type for f in fields(AcceleratorConfig) if f.name != "sources"}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"{path}: unknown accelerator keys {unknown}; valid: {sorted(known)}")
    values = {k: _typed(path, k, v, known[k]) for k, v in data.items()}
    cfg = preset(base)
    try:
        return replace(cfg, **values, sources={**cfg.sources, **{k: f"user file {Path(path).name}" for k in values}})
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def _accelerator_table(path: str | Path, data: dict) -> dict:
    """The ``[accelerator]`` table, or the top level when there is none (never both)."""
    if "accelerator" not in data:
        return data
    table = data["accelerator"]
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: accelerator must be a table ([accelerator]), not {type(table).__name__}")
    outside = sorted(set(data) - {"accelerator"})
    if outside:
        raise ConfigError(f"{path}: keys {outside} lie outside [accelerator]; move them into it")
    return dict(table)


def _typed(path: str | Path, key: str, value: object, annotation: str) -> object:
    """``value`` checked against the field's annotation (ints are accepted for floats; booleans never count as
    numbers); a mismatch is a `ConfigError` naming the field."""
    if annotation == "float" and type(value) in (int, float) and math.isfinite(value):
        return float(value)
    expected = {"int": int, "bool": bool, "str": str}.get(annotation)
    if expected is not None and type(value) is expected:
        return value
    want = "a finite number" if annotation == "float" else f"{'an' if annotation == 'int' else 'a'} {annotation}"
    raise ConfigError(f"{path}: {key} = {value!r} must be {want}, not {type(value).__name__}")
