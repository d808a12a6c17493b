"""Bit-packing of per-node signed integer codes, grouped by bitwidth (real low-bit storage, not fake-quant).

Code convention (shared by the whole ``quant`` storage / integer path and by ``hw/``):

* A node with bitwidth ``b`` holds *symmetric* signed codes ``q`` in ``[-(2^(b-1) - 1), 2^(b-1) - 1]``
  (A2Q's grid: no ``-2^(b-1)`` level), stored as the low ``b`` bits of the two's-complement value.
* ``b = 0`` and ``b = 1`` nodes can only hold the code 0 (A2Q's ``b = 1`` quantizes to all zeros), so **nothing is
  stored for them**: their stored width is 0 bits (``stored_bits(b) = b if b >= 2 else 0``). Their codes are
  validated to be 0 on packing and come back as 0.
* Post-ReLU (unsigned) tensors follow A2Q: a signed ``b + 1``-bit code; nothing special here.

Layout of :class:`PackedRows` (little-endian, LSB-first everywhere):

* Nodes are grouped by stored width ``w`` in ascending order ``2, 3, ..., 8`` (stable: node-ID order inside a
  group). Group ``w`` is the row-major bit stream of its ``n_w x F`` codes, code ``k`` occupying bits
  ``[k*w, (k+1)*w)`` of the group stream, bit ``i`` of a stream living in byte ``i // 8``, bit ``i % 8``.
  Each group starts on a byte boundary; its last byte is zero-padded.
* ``group_byte_offsets[w]`` (w = 0..8) is the first byte of group ``w`` and ``group_byte_offsets[9]`` the payload
  length (groups 0 and 1 are empty).
* Per node: ``bits[i]`` (the *declared* bitwidth, 0..8) and ``bit_offsets[i]``, the first payload bit of node
  ``i``'s row (``8 * group_byte_offsets[w] + rank_in_group * F * w``). The offsets are derivable from ``bits`` by a
  prefix count, so :mod:`quant.formats.storage` charges only the 4-bit bitwidth table and the group table for them.

Speed: 8 codes (one per byte of a uint64 word) are merged into ``w`` bytes by three SWAR stages (byte pairs, 16-bit
pairs, 32-bit halves: mask, shift, OR) run in place on cache-sized chunks; unpacking runs the stages backwards and
sign-extends with an int8 arithmetic shift. One core reaches > 100 MB/s of codes for every bitwidth
(``benchmarks/pack_speed.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_BITS = 8


def stored_bits(bits: np.ndarray | int) -> np.ndarray | int:
    """Bits stored per code for declared bitwidth ``bits`` (0 for b <= 1, else b)."""
    return np.where(np.asarray(bits) >= 2, bits, 0) if not np.isscalar(bits) else (bits if bits >= 2 else 0)


def code_range(bits: int) -> tuple[int, int]:
    """Symmetric code range ``(-qmax, qmax)`` with ``qmax = 2^(b-1) - 1`` (``(0, 0)`` for b <= 1)."""
    qmax = (1 << (bits - 1)) - 1 if bits >= 1 else 0
    return -qmax, qmax


@dataclass(frozen=True, kw_only=True)
class PackedRows:
    """Bit-packed per-node code rows.

    Shapes: payload (P,) uint8, bits (N,) uint8, bit_offsets (N,) int64, group_byte_offsets (MAX_BITS + 2,) int64.
    """

    payload: np.ndarray
    bits: np.ndarray
    bit_offsets: np.ndarray
    group_byte_offsets: np.ndarray
    num_features: int

    @property
    def num_nodes(self) -> int:
        return int(self.bits.shape[0])

    @property
    def payload_bytes(self) -> int:
        return int(self.payload.nbytes)


def _check_inputs(codes: np.ndarray, bits: np.ndarray) -> None:
    if codes.ndim != 2 or codes.dtype != np.int8:
        raise TypeError(f"pack_rows: codes must be a 2-D int8 array (N, F), got {codes.dtype} {codes.shape}")
    if bits.shape != (codes.shape[0],):
        raise ValueError(f"pack_rows: bits must have shape ({codes.shape[0]},) = (N,), got {bits.shape}")
    if bits.size and (bits.min() < 0 or bits.max() > MAX_BITS):
        raise ValueError(f"pack_rows: bitwidths must lie in 0..{MAX_BITS}, got [{bits.min()}, {bits.max()}]")
    # |q| <= 2^(b-1) - 1 per row; rows with b <= 1 must be all zero. Two int8 reductions, no widening copy.
    qmax = np.where(bits >= 1, (1 << np.maximum(bits.astype(np.int64) - 1, 0)) - 1, 0)  # (N,)
    if codes.shape[1] == 0:
        return
    row_max = codes.max(axis=1).astype(np.int64)
    row_min = codes.min(axis=1).astype(np.int64)
    row_absmax = np.maximum(row_max, -row_min)  # (N,)
    bad = np.flatnonzero(row_absmax > qmax)
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"pack_rows: node {i} has a code of magnitude {int(row_absmax[i])} outside the symmetric "
            f"{int(bits[i])}-bit range [-{int(qmax[i])}, {int(qmax[i])}] ({bad.size} such nodes); "
            "clamp the codes or raise the bitwidth"
        )


CHUNK_WORDS = 1 << 15  # 256 KiB of uint64 per pass: keeps the 8 shift/mask passes in cache


def _swar_stages(width: int, down: bool) -> list[tuple[np.uint64, np.uint64, np.uint64]]:
    """(keep_mask, move_mask, shift) per SWAR stage that merges (down) or splits (up) pairs of lanes.

    Packing merges byte pairs into 16-bit lanes, then 16-bit pairs, then 32-bit halves: 3 stages instead of 7
    per-code moves. Unpacking runs the inverse stages in reverse order.
    """
    stages = []
    for lane, count in ((8, 1), (16, 2), (32, 4)):  # lane size, codes per half-lane before the merge
        bits = width * count
        field = (1 << bits) - 1
        low = sum(field << (2 * lane * k) for k in range(64 // (2 * lane)))  # low half of every lane pair
        if down:  # high half at bit `lane` moves down to bit `bits`
            stages.append((np.uint64(low), np.uint64(low << lane), np.uint64(lane - bits)))
        else:  # bits [bits, 2*bits) of a merged lane move up to bit `lane`
            stages.append((np.uint64(low), np.uint64(low << bits), np.uint64(lane - bits)))
    return stages if down else stages[::-1]


def _move_fields(src: np.ndarray, width: int, down: bool) -> np.ndarray:
    """Move 8 ``width``-bit fields per uint64 between byte slots (bit 8k) and packed slots (bit k*width).

    ``down=True`` packs (byte slot -> packed slot; the input bytes must already be masked to ``width`` bits),
    ``down=False`` spreads. Works in place on cache-sized chunks. Shapes: src (W,) uint64 -> src.
    """
    out = src
    tmp = np.empty(min(CHUNK_WORDS, src.shape[0]), dtype=np.uint64)
    stages = _swar_stages(width, down)
    shift_op = np.right_shift if down else np.left_shift
    for lo in range(0, src.shape[0], CHUNK_WORDS):
        o = out[lo : lo + CHUNK_WORDS]
        t = tmp[: o.shape[0]]
        for keep, move, dist in stages:
            np.bitwise_and(o, move, out=t)
            shift_op(t, dist, out=t)
            np.bitwise_and(o, keep, out=o)
            np.bitwise_or(o, t, out=o)
    return out


def pack_codes(values: np.ndarray, width: int) -> np.ndarray:
    """Pack a flat int8 code array into a LSB-first bit stream of ``width`` (1..8) bits per code.

    Shapes: values (M,) int8 -> (ceil(M * width / 8),) uint8.
    """
    m = values.shape[0]
    u8 = values.view(np.uint8)
    if width == 8:
        return u8.copy()
    num_words = -(-m // 8)
    v = np.zeros(num_words * 8, dtype=np.uint8)
    v[:m] = u8
    v &= np.uint8((1 << width) - 1)  # low `width` bits of the two's complement
    byte_words = v.view("<u8")  # (W,): code k of a group of 8 sits at bits [8k, 8k + width)
    word = _move_fields(byte_words, width, down=True)  # (W,): code k at bits [k*width, (k+1)*width)
    out = word.astype("<u8", copy=False).view(np.uint8).reshape(num_words, 8)[:, :width]  # 8 codes = width bytes
    return out.reshape(-1)[: -(-m * width // 8)]


def unpack_codes(stream: np.ndarray, width: int, count: int) -> np.ndarray:
    """Inverse of :func:`pack_codes`: ``count`` sign-extended codes. Shapes: stream (B,) uint8 -> (count,) int8."""
    nbytes = -(-count * width // 8)
    if stream.shape[0] < nbytes:
        raise ValueError(f"unpack_codes: stream has {stream.shape[0]} bytes, {count} codes of {width} bits need "
                         f"{nbytes}; the payload is truncated")
    if width == 8:
        return stream[:count].view(np.int8).copy()
    num_words = -(-count // 8)
    src = stream[: num_words * width]
    if src.shape[0] < num_words * width:  # the last group of 8 codes is partial: zero-pad it
        src = np.concatenate([src, np.zeros(num_words * width - src.shape[0], dtype=np.uint8)])
    buf = np.zeros((num_words, 8), dtype=np.uint8)
    buf[:, :width] = src.reshape(num_words, width)
    word = buf.view("<u8").reshape(num_words)  # (W,)
    spread = _move_fields(word, width, down=False)  # (W,): one code per byte
    out = spread.astype("<u8", copy=False).view(np.uint8)[:count]
    # sign-extend: move the b-bit value to the top of an int8 and shift back arithmetically
    return (out << np.uint8(8 - width)).view(np.int8) >> np.int8(8 - width)


def pack_rows(codes: np.ndarray, bits: np.ndarray) -> PackedRows:
    """Pack per-node code rows grouped by bitwidth.

    Args:
        codes: (N, F) int8 symmetric codes, ``|codes[i]| <= 2^(bits[i]-1) - 1``.
        bits: (N,) integer bitwidths in 0..8 (cast to uint8).
    Returns:
        :class:`PackedRows`; ``unpack_rows(pack_rows(c, b)) == c``.
    """
    codes = np.asarray(codes)
    bits = np.asarray(bits)
    _check_inputs(codes, bits)
    bits = bits.astype(np.uint8)
    n, f = codes.shape
    width = stored_bits(bits).astype(np.int64)  # (N,)
    order = np.argsort(width, kind="stable")  # group by stored width, node order inside a group
    counts = np.bincount(width, minlength=MAX_BITS + 1)  # (9,)
    group_bytes = -(-counts * f * np.arange(MAX_BITS + 1) // 8)  # (9,)
    group_byte_offsets = np.concatenate([[0], np.cumsum(group_bytes)]).astype(np.int64)  # (10,)
    payload = np.empty(int(group_byte_offsets[-1]), dtype=np.uint8)
    bit_offsets = np.empty(n, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    for w in range(MAX_BITS + 1):
        idx = order[starts[w] : starts[w + 1]]  # nodes of group w, ascending ID
        bit_offsets[idx] = 8 * group_byte_offsets[w] + np.arange(idx.size, dtype=np.int64) * f * w
        if w >= 2 and idx.size and f:
            rows = codes if idx.size == n else codes[idx]
            payload[group_byte_offsets[w] : group_byte_offsets[w + 1]] = pack_codes(rows.reshape(-1), w)
    return PackedRows(payload=payload, bits=bits, bit_offsets=bit_offsets,
                      group_byte_offsets=group_byte_offsets, num_features=f)


def unpack_rows(packed: PackedRows) -> np.ndarray:
    """Inverse of :func:`pack_rows`. Returns (N, F) int8 codes (zeros for b <= 1 nodes)."""
    n, f = packed.num_nodes, packed.num_features
    width = stored_bits(packed.bits).astype(np.int64)
    offs = packed.group_byte_offsets
    if offs.shape != (MAX_BITS + 2,) or offs[-1] != packed.payload.shape[0]:
        raise ValueError(f"unpack_rows: group table {offs.tolist()} does not match the payload of "
                         f"{packed.payload.shape[0]} bytes; the packed buffer is corrupt or truncated")
    out = np.zeros((n, f), dtype=np.int8)
    for w in range(2, MAX_BITS + 1):
        idx = np.flatnonzero(width == w)
        if idx.size == 0 or f == 0:
            continue
        stream = packed.payload[offs[w] : offs[w + 1]]
        rows = unpack_codes(stream, w, idx.size * f).reshape(idx.size, f)  # (n_w, F)
        if idx.size == n:
            out = rows
        else:
            out[idx] = rows
    return out


def unpack_node(packed: PackedRows, node: int) -> np.ndarray:
    """Random access to one node's row via its bit offset (what a DMA engine does). Returns (F,) int8."""
    w = int(stored_bits(int(packed.bits[node])))
    f = packed.num_features
    if w == 0:
        return np.zeros(f, dtype=np.int8)
    start = int(packed.bit_offsets[node])
    first, shift = divmod(start, 8)
    nbytes = -(-(shift + f * w) // 8)
    chunk = np.unpackbits(packed.payload[first : first + nbytes], bitorder="little")[shift : shift + f * w]
    vals = (chunk.reshape(f, w).astype(np.int16) << np.arange(w, dtype=np.int16)).sum(axis=1)  # (F,)
    vals -= (vals >> (w - 1) & 1) << w
    return vals.astype(np.int8)
