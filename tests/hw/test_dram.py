import pytest

from hw.analytic import stream_cycles
from hw.config import AcceleratorConfig
from hw.dram import DRAMChannel


@pytest.mark.parametrize("nbytes", [1, 127, 128, 129, 4096, 100_000])
def test_stream_matches_closed_form(nbytes):
    cfg = AcceleratorConfig()
    d = DRAMChannel(cfg)
    done = d.request(0.0, 0, nbytes, write=False, tensor="x")
    accesses = -(-nbytes // 128)
    assert d.stats.accesses == accesses and d.stats.bytes_read == 128 * accesses
    assert done == pytest.approx(stream_cycles(cfg, nbytes))
    assert done == pytest.approx(cfg.dram_row_miss_cycles + accesses * 0.5 + cfg.dram_latency_cycles)
    rows = -(-accesses // (cfg.dram_row_bytes // 128))
    assert d.stats.row_misses == rows and d.stats.row_hits == accesses - rows


def test_unaligned_request_touches_two_accesses_and_row_hits():
    d = DRAMChannel(AcceleratorConfig())
    d.request(0.0, 100, 40, write=True, tensor="w")  # bytes 100..139 straddle accesses 0 and 1
    assert d.stats.accesses == 2 and d.stats.bytes_written == 256 and d.stats.useful_bytes_by_tensor["w"] == 40
    d.request(10.0, 256, 8, write=False, tensor="r")  # same open row
    assert d.stats.row_hits == 2 and d.stats.row_misses == 1


def test_more_latency_never_reduces_cycles():
    ends = []
    for lat in (10, 100, 400):
        d = DRAMChannel(AcceleratorConfig(dram_latency_cycles=lat))
        ends.append(max(d.request(float(t), 5000 * t, 300, write=False, tensor="x") for t in range(50)))
    assert ends == sorted(ends) and ends[0] < ends[-1]


def test_bandwidth_bound_stream():
    cfg = AcceleratorConfig(dram_bandwidth_gbs=64.0)  # 64 B/cycle -> 2 cycles per 128 B access
    d = DRAMChannel(cfg)
    assert d.request(0.0, 0, 128 * 1000, write=False, tensor="x") == pytest.approx(
        cfg.dram_row_miss_cycles + 2000 + cfg.dram_latency_cycles)
