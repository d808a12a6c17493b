"""Adaptive-Package / bitmap decoder (and the matching encoder on the store side).

Per-unit timing is the RTL's (:func:`hw.timing.decoder_package_cycles`): a package of ``L`` 64-bit words loads
in ``L`` cycles, then emits one (node, feature, code) beat per cycle (the beats of
:func:`quant.formats.adaptive_package.decode_beats`), plus one cycle per all-zero bitmap row it walks over. The plain
bitmap format is charged the same way per node row (its words, then one beat per non-zero). ``num_decoders``
decoders share a tile's packages (assumption: perfect round-robin). Dense features bypass the decoder.
The encoder on the write-back side is charged the same rate (assumption).
"""

from __future__ import annotations

import numpy as np

from hw.pipeline import StageStats
from hw.timing import decoder_package_cycles
from quant.formats.adaptive_package import AdaptivePackageStream


def package_decode_cycles(stream: AdaptivePackageStream, lengths: np.ndarray, nnz: np.ndarray) -> np.ndarray:
    """(P,) decoder cycles of every package = words + values + all-zero rows walked over (vectorised walk).

    The walk of package ``k`` goes from its ``first_node`` to the node of its last value; the rows it skips are
    the all-zero rows strictly between the two (same walk as ``hw.timing.decoder_skipped_rows``).
    """
    counts = stream.num_values.astype(np.int64)
    if counts.size == 0:
        return np.zeros(0, np.int64)
    node_end = np.cumsum(nnz)  # (N,) rank after a node's last value
    first_rank = node_end[stream.first_node.astype(np.int64)] - nnz[stream.first_node.astype(np.int64)] \
        + stream.first_value.astype(np.int64)
    last_node = np.searchsorted(node_end, first_rank + counts - 1, side="right")
    zero_before = np.r_[0, np.cumsum(nnz == 0)]  # zero rows among nodes [0, i)
    skipped = np.maximum(0, zero_before[last_node] - zero_before[stream.first_node.astype(np.int64) + 1])
    base = np.array([decoder_package_cycles(64 * w, 0) for w in (1, 2, 3)])
    return base[lengths // 8 - 1] + counts + skipped


def decode_cycles(work: int, num_decoders: int) -> int:
    """Cycles of a tile whose packages need ``work`` decoder cycles in total, spread over the decoders."""
    return -(-int(work) // num_decoders) if work else 0


class DecoderStats(StageStats):
    """Decoder cycle accounting; ``work_items`` = decoder cycles summed over decoders."""
