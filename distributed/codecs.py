"""Row codecs for halo rows: encode a (N, F) float block into one flat uint8 payload and back.

Pure functions, shared by the halo exchange, the tests and the benchmarks. Every payload has exactly
``num_bytes(codec, N, F)`` bytes, so a receiver knows each peer's chunk size without a header.

Codecs (``CODECS``):
  * ``fp32``, ``fp16``: plain casts, 4F and 2F bytes per row. ``fp64``: 8F bytes per row, lossless for float64
    runs (``DistTrainConfig(dtype="float64")``, used to compare against one process beyond float32 rounding).
  * ``int8``/``int4``/``int2``/``int1``: Sylvie's Low-bit Module (arXiv 2303.01277): per-row min/max asymmetric
    uniform quantization with stochastic rounding (unbiased up to 2^-17 step, 16-bit noise), b-bit codes packed
    8/b per byte within a row, fp16 row minimum and fp16 step per row. Bytes per row: ceil(F b / 8) + 4. With 1 bit
    every value becomes the row min or the row max. Constant rows (max == min) decode exactly (step 0, no division
    by zero).
  * ``int1-2c``: a contractive one-bit code: bit = x > row mean, and the two fp16 centroids (means of the two
    sides) per row; same ceil(F/8) + 4 bytes per row. Deterministic; ||x - C(x)||^2 <= ||x - mean(x)||^2.

Payload layout: [packed codes (N * row_code_bytes) | metadata (N, 2) fp16 as bytes (N * 4)].
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

CODECS = ("fp32", "fp16", "fp64", "int8", "int4", "int2", "int1", "int1-2c")
_FLOAT_BYTES = {"fp64": 8, "fp32": 4, "fp16": 2}
_BITS = {"int8": 8, "int4": 4, "int2": 2, "int1": 1, "int1-2c": 1}
META_BYTES_PER_ROW = 4  # two fp16 numbers per row


def check_codec(codec: str) -> None:
    if codec not in CODECS:
        raise ValueError(f"unknown codec {codec!r}; valid codecs: {', '.join(CODECS)}")


def bits_of(codec: str) -> int:
    """Bits per value of ``codec`` (64, 32, 16 for the float codecs)."""
    check_codec(codec)
    return 8 * _FLOAT_BYTES[codec] if codec in _FLOAT_BYTES else _BITS[codec]


def lossless_codec(dtype: torch.dtype) -> str:
    """The codec that carries rows of ``dtype`` unchanged: fp64 for float64, else fp32 (float32 and narrower)."""
    return "fp64" if dtype == torch.float64 else "fp32"


def row_bytes(codec: str, num_features: int) -> int:
    """Bytes of one encoded row of width F: 8F, 4F, 2F, or ceil(F b / 8) + 4 for the integer codecs."""
    check_codec(codec)
    if codec in _FLOAT_BYTES:
        return _FLOAT_BYTES[codec] * num_features
    return math.ceil(num_features * _BITS[codec] / 8) + META_BYTES_PER_ROW


def num_bytes(codec: str, num_rows: int, num_features: int) -> int:
    """Exact payload size of ``encode`` for a (num_rows, num_features) block."""
    return num_rows * row_bytes(codec, num_features)


CODEC_WIDTH_ORDER = ("int1", "int2", "int4", "int8", "fp16", "fp32", "fp64")  # narrowest first (no int1-2c: lossy)


def exact_codecs(blocks: list[Tensor], dtype: torch.dtype) -> list[bool]:
    """For each codec of `CODEC_WIDTH_ORDER`: whether its decoded rows equal every block (N_p, F) exactly (the
    lossless codec of ``dtype`` and wider ones: True). Exact integer-grid rows are deterministic under stochastic
    rounding (floor(k + u) = k for u in [0, 1)), so a seeded local generator decides as well as any. Not monotone
    in width: binary rows fit int1 but not int2 (whose fp16 step 1/3 is inexact)."""
    lossless = CODEC_WIDTH_ORDER.index(lossless_codec(dtype))
    gen = torch.Generator(device=blocks[0].device if blocks else "cpu").manual_seed(0)
    return [i >= lossless or all(b.numel() == 0 or torch.equal(decode(encode(b, c, gen), c, *b.shape).to(b.dtype), b)
                                 for b in blocks)
            for i, c in enumerate(CODEC_WIDTH_ORDER)]


def narrowest_exact_codec(blocks: list[Tensor], dtype: torch.dtype) -> str:
    """The first codec of `CODEC_WIDTH_ORDER` that carries every block exactly (`exact_codecs`); binary rows: int1."""
    return CODEC_WIDTH_ORDER[exact_codecs(blocks, dtype).index(True)]


def pack_bits(codes: Tensor, bits: int) -> Tensor:
    """Pack integer codes in [0, 2^bits) along each row, first value in the lowest bits.

    Shapes: codes (N, F) integer or bool -> (N, ceil(F bits / 8)) uint8. CPU codes go through numpy (packbits for
    one bit, lane-wise or for 2 and 4): the same bytes as `pack_bits_shift`, several times faster.
    """
    if codes.device.type != "cpu":
        return pack_bits_shift(codes, bits)
    if bits == 1:
        return torch.from_numpy(np.packbits(codes.contiguous().numpy(), axis=1, bitorder="little"))
    c = codes.to(torch.uint8).contiguous().numpy()  # (N, F)
    if bits == 8:
        return torch.from_numpy(c)
    per_byte = 8 // bits
    pad = (-c.shape[1]) % per_byte
    lanes = np.pad(c, ((0, 0), (0, pad))).reshape(c.shape[0], (c.shape[1] + pad) // per_byte, per_byte)  # (N, B, 8/b)
    packed = lanes[:, :, 0].copy()
    for lane in range(1, per_byte):
        packed |= lanes[:, :, lane] << (lane * bits)
    return torch.from_numpy(packed)


def pack_bits_shift(codes: Tensor, bits: int) -> Tensor:
    """`pack_bits` with tensor shifts on any device (the path of GPU tensors). Shapes as `pack_bits`."""
    n, f = codes.shape
    per_byte = 8 // bits
    pad = (-f) % per_byte
    nbytes = (f + pad) // per_byte
    c = torch.nn.functional.pad(codes.to(torch.uint8), (0, pad)).view(n, nbytes, per_byte)  # (N, B, 8/b)
    shifts = torch.arange(per_byte, dtype=torch.uint8, device=codes.device) * bits  # (8/b,)
    return (c << shifts).sum(dim=-1, dtype=torch.uint8)  # disjoint bit fields: sum == or


def unpack_bits(packed: Tensor, bits: int, num_features: int) -> Tensor:
    """Inverse of `pack_bits`. Shapes: (N, B) uint8 -> (N, num_features) uint8."""
    if packed.device.type == "cpu" and bits in (1, 8):
        p = packed.contiguous().numpy()
        return torch.from_numpy(p[:, :num_features] if bits == 8 else
                                np.unpackbits(p, axis=1, count=num_features, bitorder="little"))
    return unpack_bits_shift(packed, bits, num_features)


def unpack_bits_shift(packed: Tensor, bits: int, num_features: int) -> Tensor:
    """`unpack_bits` with tensor shifts on any device (the path of GPU tensors)."""
    per_byte = 8 // bits
    shifts = torch.arange(per_byte, dtype=torch.uint8, device=packed.device) * bits
    mask = (1 << bits) - 1
    codes = (packed.unsqueeze(-1) >> shifts) & mask  # (N, B, 8/b)
    return codes.reshape(packed.size(0), packed.size(1) * per_byte)[:, :num_features]


NOISE_BITS = 16  # resolution of stochastic rounding: y is rounded to multiples of 2^-16 first, then rounded with noise


def noise16(shape: tuple[int, ...], generator: torch.Generator | None = None,
            device: torch.device | str = "cpu") -> Tensor:
    """Uniform integers in [0, 2^16) of ``shape`` drawn from ``generator`` (None: torch's default one).

    On the CPU: numpy's PCG64, seeded by one 63-bit integer taken from ``generator``, each raw 64-bit word split into
    four values (uint16), about 5x faster than a float32 draw; the same generator state gives the same noise.
    Elsewhere: torch.randint on the device (int32).
    """
    device = torch.device(device)
    if device.type != "cpu":
        return torch.randint(0, 1 << NOISE_BITS, shape, generator=generator, device=device, dtype=torch.int32)
    seed = int(torch.randint(0, 2 ** 63 - 1, (), generator=generator))
    count = math.prod(shape)
    words = np.random.default_rng(seed).bit_generator.random_raw((count + 3) // 4)  # (ceil(count / 4),) uint64
    return torch.from_numpy(words.view(np.uint16)[:count].reshape(shape))


def stochastic_codes(x: Tensor, mn: Tensor, scale: Tensor, noise: Tensor, bits: int) -> Tensor:
    """Stochastic rounding of z = (x - mn) * scale, with scale = 2^16 / step, into ``bits``-bit codes.

    z is y = (x - mn) / step in units of 2^-16. One bit: code = [noise < z - 1/2], so P(code = 1) = ceil(z - 1/2)
    / 2^16. More bits: code = min((floor(z + 1/2) + noise) >> 16, 2^bits - 1), so P(code = floor(y) + 1) =
    (round(z) mod 2^16) / 2^16. Either way E[code] = round(z) / 2^16, within 2^-17 of y: unbiased up to 2^-17 step.
    CPU tensors go through numpy (its broadcast loops beat torch's on one thread), others through
    `stochastic_codes_torch`: the same float32 operations in the same order, so the two agree code for code.

    Shapes: x (N, F) float32, mn and scale (N, 1) float32, noise (N, F) integer in [0, 2^16) ->
    (N, F) bool (one bit) or uint8.
    """
    if x.device.type != "cpu":
        return stochastic_codes_torch(x, mn, scale, noise, bits)
    qmax = (1 << bits) - 1
    z = np.subtract(x.numpy(), mn.numpy())  # (N, F) float32
    z *= scale.numpy()
    k = noise.numpy()
    if bits == 1:
        z -= 0.5
        return torch.from_numpy(k < z)
    z += 0.5
    rounded = z.astype(np.int32)  # z + 1/2 >= 0: truncation is floor
    rounded += k
    rounded >>= NOISE_BITS
    np.minimum(rounded, qmax, out=rounded)  # z may pass qmax * 2^16 by float32 rounding
    return torch.from_numpy(rounded.astype(np.uint8))


def stochastic_codes_torch(x: Tensor, mn: Tensor, scale: Tensor, noise: Tensor, bits: int) -> Tensor:
    """`stochastic_codes` with torch operations on any device (the path of GPU tensors). Shapes as there."""
    qmax = (1 << bits) - 1
    z = (x - mn) * scale
    if bits == 1:
        return noise < (z - 0.5)
    rounded = (z + 0.5).to(torch.int32) + noise
    return (rounded >> NOISE_BITS).clamp_(max=qmax).to(torch.uint8)


def _fp16_down(x: Tensor) -> Tensor:
    """The largest fp16 value <= x (x float32), so that a rounded minimum still covers the row."""
    h = x.clamp(-65504.0, 65504.0).half()
    return torch.where(h.float() > x, torch.nextafter(h, torch.full_like(h, -math.inf)), h)


def _fp16_up(x: Tensor) -> Tensor:
    """The smallest fp16 value >= x (x float32, >= 0)."""
    h = x.clamp(max=65504.0).half()
    return torch.where(h.float() < x, torch.nextafter(h, torch.full_like(h, math.inf)), h)


def quantize_rows(x: Tensor, bits: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Per-row min/max asymmetric uniform quantization with stochastic rounding (`stochastic_codes`).

    step = (max - mn) / (2^bits - 1); mn and step are rounded to fp16 outward (mn down, step up) before use, so codes
    stay in range and E[code * step + mn] = x up to 2^-17 step. A row with step 0 has x == mn everywhere: z = 0,
    code 0, decoded as mn exactly.

    Shapes: x (N, F) float -> codes (N, F) uint8 (one bit: bool), mn (N,) fp16, step (N,) fp16.
    """
    qmax = (1 << bits) - 1
    x = x.float().contiguous()
    mn16 = _fp16_down(x.amin(dim=1))  # (N,)
    step16 = _fp16_up((x.amax(dim=1) - mn16.float()) / qmax)  # (N,)
    # a positive fp16 step is >= 6e-8, so the clamp only guards step 0 (where x - mn is 0, and z stays 0)
    scale = (float(1 << NOISE_BITS) / step16.float().clamp_min(1e-30))[:, None]  # (N, 1)
    noise = noise16(tuple(x.shape), generator, x.device)  # (N, F)
    return stochastic_codes(x, mn16.float()[:, None].contiguous(), scale.contiguous(), noise, bits), mn16, step16


def two_centroid_rows(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Contractive one-bit code: bit = x > row mean; centroids = fp16 means of the two sides.

    Shapes: x (N, F) float -> bits (N, F) bool, low (N,) fp16, high (N,) fp16.
    """
    x = x.float()
    mean = x.mean(dim=1, keepdim=True)  # (N, 1)
    hi = x > mean  # (N, F)
    hi_f = hi.float()
    n_hi = hi_f.sum(dim=1)  # (N,) exact counts (< 2^24)
    n_lo = x.size(1) - n_hi
    sum_hi = torch.bmm(x.unsqueeze(1), hi_f.unsqueeze(2)).view(-1)  # (N,) sum of the values above the mean
    sum_lo = x.sum(dim=1) - sum_hi
    # An empty side (constant row) takes the row mean, so the row decodes exactly.
    high = torch.where(n_hi > 0, sum_hi / n_hi.clamp_min(1), mean[:, 0])
    low = torch.where(n_lo > 0, sum_lo / n_lo.clamp_min(1), mean[:, 0])
    return hi, low.clamp(-65504, 65504).half(), high.clamp(-65504, 65504).half()


def encode(x: Tensor, codec: str, generator: torch.Generator | None = None) -> Tensor:
    """Encode rows into one flat payload. Shapes: x (N, F) -> (num_bytes(codec, N, F),) uint8."""
    check_codec(codec)
    n, f = x.shape
    if codec == "fp64":
        return x.detach().double().contiguous().view(torch.uint8).reshape(-1)
    if codec == "fp32":
        return x.detach().float().contiguous().view(torch.uint8).reshape(-1)
    if codec == "fp16":
        return x.detach().clamp(-65504, 65504).half().contiguous().view(torch.uint8).reshape(-1)
    x = x.detach()
    if codec == "int1-2c":
        codes, a, b = two_centroid_rows(x)
    else:
        codes, a, b = quantize_rows(x, _BITS[codec], generator)
    packed = pack_bits(codes, _BITS[codec]).reshape(-1)  # (N * ceil(F b / 8),)
    meta = torch.stack([a, b], dim=1).contiguous().view(torch.uint8).reshape(-1)  # (N * 4,)
    return torch.cat([packed, meta])


def decode(payload: Tensor, codec: str, num_rows: int, num_features: int) -> Tensor:
    """Inverse of `encode`. Shapes: (num_bytes(codec, N, F),) uint8 -> (N, F) float32 (fp64: float64)."""
    check_codec(codec)
    n, f = num_rows, num_features
    expected = num_bytes(codec, n, f)
    if payload.numel() != expected:
        raise ValueError(f"decode: payload of {payload.numel()} B for codec {codec!r} and ({n}, {f}); "
                         f"expected {expected} B")
    payload = payload.contiguous()
    if n == 0:
        return torch.zeros((0, f), dtype=torch.float64 if codec == "fp64" else torch.float32, device=payload.device)
    if codec == "fp64":
        return payload.view(torch.float64).view(n, f).clone()
    if codec == "fp32":
        return payload.view(torch.float32).view(n, f).clone()
    if codec == "fp16":
        return payload.view(torch.float16).view(n, f).float()
    bits = _BITS[codec]
    code_bytes = n * math.ceil(f * bits / 8)
    codes = unpack_bits(payload[:code_bytes].view(n, code_bytes // max(n, 1)), bits, f)  # (N, F) uint8
    meta = payload[code_bytes:].clone().view(torch.float16).view(n, 2).float()  # (N, 2)
    a, b = meta[:, :1], meta[:, 1:]
    if codec == "int1-2c":  # lerp is exact at its ends (weight 0: low, weight 1: high), unlike low + bit * (high - low)
        return torch.lerp(a.expand(n, f), b.expand(n, f), codes.float())
    return codes.float().mul_(b).add_(a)  # code * step + min (one bit: min, or min + step)
