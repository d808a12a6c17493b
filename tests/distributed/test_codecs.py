"""Codecs: exact byte counts, round-trip error bounds, unbiased stochastic rounding, contractive 1-bit code, and the
narrowest exact codec of the one-time input exchange (the ranks agree on it)."""

import math

import numpy as np
import pytest
import torch

from distributed import codecs

INT = {"int8": 8, "int4": 4, "int2": 2, "int1": 1}


@pytest.mark.parametrize("codec", codecs.CODECS)
@pytest.mark.parametrize("shape", [(7, 13), (1, 1), (0, 5), (33, 256)])
def test_payload_size_equals_formula(codec, shape):
    n, f = shape
    formula = {"fp64": 8 * f, "fp32": 4 * f, "fp16": 2 * f}.get(codec, math.ceil(f * codecs.bits_of(codec) / 8) + 4) * n
    payload = codecs.encode(torch.randn(n, f), codec)
    assert payload.dtype == torch.uint8 and payload.numel() == formula == codecs.num_bytes(codec, n, f)
    assert codecs.decode(payload, codec, n, f).shape == (n, f)


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_pack_unpack_round_trip_against_numpy(bits):
    codes = torch.randint(0, 1 << bits, (5, 11), dtype=torch.uint8)
    packed = codecs.pack_bits(codes, bits)
    assert torch.equal(codecs.unpack_bits(packed, bits, 11), codes)
    shifted = codecs.pack_bits_shift(codes, bits)  # the GPU path, run on the CPU
    assert torch.equal(shifted, packed) and torch.equal(codecs.unpack_bits_shift(shifted, bits, 11), codes)
    if bits == 1:  # independent reference of the shift path: numpy little-endian bit packing within a row
        ref = np.packbits(codes.numpy(), axis=1, bitorder="little")
        assert np.array_equal(shifted.numpy(), ref)


def test_fp_codecs():
    x = torch.randn(6, 9)
    assert torch.equal(codecs.decode(codecs.encode(x, "fp32"), "fp32", 6, 9), x)
    y = codecs.decode(codecs.encode(x, "fp16"), "fp16", 6, 9)
    assert torch.allclose(y, x.double().half().double().float(), atol=0)
    xd = torch.randn(6, 9, dtype=torch.float64)
    yd = codecs.decode(codecs.encode(xd, "fp64"), "fp64", 6, 9)
    assert yd.dtype == torch.float64 and torch.equal(yd, xd)  # lossless, unlike fp32
    assert not torch.equal(codecs.decode(codecs.encode(xd, "fp32"), "fp32", 6, 9).double(), xd)
    assert codecs.decode(codecs.encode(xd[:0], "fp64"), "fp64", 0, 9).dtype == torch.float64
    assert [codecs.lossless_codec(d) for d in (torch.float64, torch.float32, torch.float16)] == ["fp64", "fp32",
                                                                                                 "fp32"]


@pytest.mark.parametrize("codec", list(INT))
def test_integer_round_trip_within_one_step(codec):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(50, 37, dtype=torch.float64).float() * torch.rand(50, 1) * 10
    y = codecs.decode(codecs.encode(x, codec, g), codec, 50, 37)
    step = (x.amax(1) - x.amin(1)).double() / ((1 << INT[codec]) - 1)  # float64 reference step
    err = (y.double() - x.double()).abs().amax(1)
    fp16_ulp = 2.0 ** -10 * x.abs().amax(1).double()  # metadata travels as fp16
    assert (err <= step * 1.002 + fp16_ulp).all()
    # values stay in the row range (up to fp16 rounding of the row minimum)
    assert (y.double().amin(1) >= x.amin(1).double() - fp16_ulp).all()


def test_int1_values_are_row_min_or_max():
    x = torch.rand(8, 40)
    y = codecs.decode(codecs.encode(x, "int1"), "int1", 8, 40)
    lo, hi = x.amin(1, keepdim=True), x.amax(1, keepdim=True)
    near = torch.minimum((y - lo).abs(), (y - hi).abs())
    assert (near <= 2e-3 * (hi - lo) + 1e-6).all()


@pytest.mark.parametrize("codec", ["int1", "int2", "int4"])
def test_stochastic_rounding_is_unbiased(codec):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4, 64)
    draws = 4000
    tiled = x.repeat(draws, 1)  # (draws * 4, 64): every row is quantized independently
    mean = codecs.decode(codecs.encode(tiled, codec, g), codec, draws * 4, 64).view(draws, 4, 64).mean(0)
    step = ((x.amax(1) - x.amin(1)) / ((1 << INT[codec]) - 1))[:, None]
    # std of one draw <= step / 2, so the mean's error is ~ step / (2 sqrt(draws)); allow 5 sigma
    assert ((mean - x).abs() <= 5 * step / (2 * math.sqrt(draws)) + 1e-3 * step).all()
    assert (mean - x).abs().mean() < (step / 50).mean()  # and the single-draw error is much larger
    single = codecs.decode(codecs.encode(x, codec, g), codec, 4, 64)
    assert (single - x).abs().mean() > 5 * (mean - x).abs().mean()


@pytest.mark.parametrize("codec", list(INT) + ["int1-2c"])
def test_constant_rows_decode_exactly(codec):
    x = torch.full((3, 10), 0.75)
    x[1] = -2.0
    y = codecs.decode(codecs.encode(x, codec), codec, 3, 10)
    assert torch.equal(y, x)
    assert torch.isfinite(y).all()


def test_two_centroid_is_contractive_and_beats_min_max():
    g = torch.Generator().manual_seed(0)
    x = torch.relu(torch.randn(200, 256, generator=g)) * torch.exp(torch.randn(200, 1, generator=g))
    y2c = codecs.decode(codecs.encode(x, "int1-2c"), "int1-2c", 200, 256).double()
    xd = x.double()
    err = ((y2c - xd) ** 2).sum(1)
    centred = ((xd - xd.mean(1, keepdim=True)) ** 2).sum(1)
    assert (err <= centred * 1.001 + 1e-6).all()  # two centroids never worse than the row mean
    assert (err < (xd ** 2).sum(1)).all()  # contractive
    # float64 reference of the code: threshold at the mean, centroids = side means
    hi = xd > xd.mean(1, keepdim=True)
    ref = torch.where(hi, (xd * hi).sum(1, keepdim=True) / hi.sum(1, keepdim=True),
                      (xd * ~hi).sum(1, keepdim=True) / (~hi).sum(1, keepdim=True))
    assert torch.allclose(y2c, ref, rtol=2e-3, atol=1e-4)
    y1 = codecs.decode(codecs.encode(x, "int1", torch.Generator().manual_seed(1)), "int1", 200, 256).double()
    assert err.sum() < ((y1 - xd) ** 2).sum()


def test_noise_reproduces_from_the_generator_state_and_covers_16_bits():
    a = codecs.noise16((3000, 7), torch.Generator().manual_seed(3))
    b = codecs.noise16((3000, 7), torch.Generator().manual_seed(3))
    c = codecs.noise16((3000, 7), torch.Generator().manual_seed(4))
    assert a.shape == (3000, 7) and torch.equal(a, b) and not torch.equal(a, c)
    values = a.numpy().astype(np.int64)
    assert values.min() >= 0 and values.max() < 1 << 16 and abs(values.mean() / 65535 - 0.5) < 0.01
    assert np.unique(values % 256).size == 256 and np.unique(values >> 8).size == 256  # both bytes vary


@pytest.mark.parametrize("bits", [1, 2, 8])
def test_stochastic_codes_follow_the_law_over_every_noise_value(bits):
    """All 2^16 noise values, each once: the mean code is round(z) / 2^16 exactly, close to y (float64)."""
    qmax = (1 << bits) - 1
    g = torch.Generator().manual_seed(5)
    y = torch.rand(1, 24, generator=g, dtype=torch.float64) * qmax  # y = (x - mn) / step in [0, qmax]
    y[0, :3] = torch.tensor([0.0, qmax, qmax / 2])  # the ends and a midpoint
    step, mn = 0.37, -1.25
    x = (y * step + mn).float()
    scale = torch.tensor([[65536 / step]], dtype=torch.float32)
    mn_t = torch.tensor([[mn]], dtype=torch.float32)
    noise = torch.arange(1 << 16, dtype=torch.int32)[:, None].expand(-1, 24).contiguous()  # (2^16, 24)
    tiled = x.expand(1 << 16, -1).contiguous()
    codes = codecs.stochastic_codes(tiled, mn_t.expand(1 << 16, 1).contiguous(),
                                    scale.expand(1 << 16, 1).contiguous(), noise.to(torch.uint16), bits)
    ref = codecs.stochastic_codes_torch(tiled, mn_t, scale, noise, bits)  # the GPU path, run on the CPU
    assert torch.equal(codes, ref)
    mean = codes.double().mean(0)  # (24,) exact: a sum of at most 2^24 small integers over 2^16
    z = ((x - mn_t) * scale)[0]  # the law's z, in float32 as the codec computes it
    rounded = torch.ceil(z - 0.5) if bits == 1 else torch.floor(z + 0.5)
    assert torch.equal(mean * 65536, rounded.double())
    # within 2^-17 of y, plus float32 rounding of z (a few ulp at qmax * 2^16)
    assert ((mean - ((x.double() - mn) / step)[0]).abs() <= 2.0 ** -17 + qmax * 2.0 ** -21).all()
    assert mean[0] == 0 and mean[1] == qmax  # the row ends are exact


def test_two_centroid_decode_is_exactly_one_of_the_two_centroids():
    x = torch.randn(40, 33) * 1e3
    payload = codecs.encode(x, "int1-2c")
    y = codecs.decode(payload, "int1-2c", 40, 33)
    meta = payload[40 * 5:].view(torch.float16).view(40, 2).float()
    assert ((y == meta[:, :1]) | (y == meta[:, 1:])).all()
    assert torch.equal(y > meta[:, :1], x > x.mean(1, keepdim=True))


def test_unknown_codec_lists_valid_ones():
    with pytest.raises(ValueError, match="valid codecs: fp32, fp16, fp64, int8"):
        codecs.encode(torch.zeros(1, 1), "int3")
    with pytest.raises(ValueError, match="int1-2c"):
        codecs.num_bytes("bf16", 1, 1)


def test_decode_rejects_wrong_size():
    with pytest.raises(ValueError, match="expected"):
        codecs.decode(torch.zeros(6, dtype=torch.uint8), "int1", 1, 8)


def test_narrowest_exact_codec_keeps_the_rows_exactly():
    g = torch.Generator().manual_seed(0)
    binary = (torch.rand(30, 40, generator=g) < 0.2).float()
    counts = torch.randint(0, 4, (30, 40), generator=g).float()
    counts[:, 0], counts[:, 1] = 0, 3  # every row spans 0..3: int2's grid
    thirds = binary / 3  # row-normalised bag-of-words: 1/3 is no fp16 value
    assert codecs.narrowest_exact_codec([binary, torch.zeros(0, 40)], torch.float32) == "int1"
    assert codecs.narrowest_exact_codec([counts], torch.float32) == "int2"
    # every block must fit: binary rows miss int2's grid (step 1/3 in fp16), int4's and int8's too
    assert codecs.exact_codecs([binary, counts], torch.float32) == [False, False, False, False, True, True, True]
    assert codecs.narrowest_exact_codec([binary, counts], torch.float32) == "fp16"
    assert codecs.narrowest_exact_codec([thirds], torch.float32) == "fp32"
    assert codecs.narrowest_exact_codec([binary.double() / 3], torch.float64) == "fp64"  # no float32 value
    for block, codec in ((binary, "int1"), (counts, "int2")):
        assert torch.equal(codecs.decode(codecs.encode(block, codec), codec, *block.shape), block)


def test_ranks_agree_on_the_narrowest_codec_exact_for_all():
    from rank_functions import agree_on_input_codec

    from distributed.launch import spawn

    assert spawn(agree_on_input_codec, 2) == ["fp16", "fp16"]
