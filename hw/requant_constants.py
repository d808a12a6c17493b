"""Bits of the requantization constants a bit-exact engine fetches per node of a GCN export's integer path.

The export's integer path (``quant.archs.gcn.integer.layer_constants``) requantizes with one multiplier per
(node, output channel): the node's input step times the channel's weight step over the XW step, as a 31-bit
``quantize_multiplier`` and a 6-bit shift. A factored design (a node scale and a channel scale applied one after
the other) keeps them on chip, but it rounds differently and is not bit-exact with the export; an engine that
reproduces the export must stream these constants with its rows. ``hw/rtl/accel_top.v`` does (its records pack
exactly these fields), and ``hw.scheduler`` charges them when ``AcceleratorConfig.requant_constants`` is set.
"""

from __future__ import annotations

MULT_BITS = 31    # quant.formats.fixed_point.quantize_multiplier's multiplier
SHIFT_BITS = 6    # its shift (0..63)
CODE_BITS_FIELD = 4  # a code width 1..16 stored as bits - 1
BIAS_BITS = 32    # a bias in accumulator units
XW_BITS_PER_LANE = MULT_BITS + SHIFT_BITS + CODE_BITS_FIELD  # XW requant: mult, shift and code width per lane
REQUANT_BITS_PER_LANE = MULT_BITS + SHIFT_BITS               # q_aggregate / next-layer requant, per lane


def xw_constant_bits(lanes: int) -> int:
    """Bits of one node's XW requantization constants (``lanes`` output channels)."""
    return lanes * XW_BITS_PER_LANE


def requant_constant_bits(lanes: int) -> int:
    """Bits of one node's q_aggregate or next-layer requantization: per-lane mult and shift, one code width."""
    return lanes * REQUANT_BITS_PER_LANE + CODE_BITS_FIELD


def output_stage_constant_bits(lanes: int, *, agg_requant: bool, bias_per_row: bool, out_requant: bool) -> int:
    """Bits of one destination row's output-stage constants: the requants the layer has and, when the bias
    differs between rows, the row's bias."""
    return (requant_constant_bits(lanes) * (int(agg_requant) + int(out_requant))
            + BIAS_BITS * lanes * int(bias_per_row))
