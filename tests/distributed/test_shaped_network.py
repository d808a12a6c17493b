"""The tc-shaped veth network of benchmarks/dist_time.py: bad arguments, real throughput, clean teardown."""

import subprocess
import time

import pytest
import torch
import torch.distributed as dist

from distributed.launch import spawn
from distributed.shaped_network import ShapedNetwork, shaped_network_available


@pytest.mark.parametrize("kwargs, match", [
    ({"world_size": 1, "rate_gbit": 1.0}, ">= 2 ranks"),
    ({"world_size": 2, "rate_gbit": 0.0}, "positive link rate"),
    ({"world_size": 2, "rate_gbit": 1.0, "delay_ms": -1.0}, "delay_ms"),
])
def test_bad_network_arguments_say_what_to_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ShapedNetwork(**kwargs)


def _timed_all_reduce(nbytes: int) -> float:
    t = torch.ones(nbytes // 4)
    dist.barrier()
    start = time.perf_counter()
    dist.all_reduce(t)
    assert torch.all(t == dist.get_world_size())  # the data crossed the shaped links intact
    return time.perf_counter() - start


@pytest.mark.slow
def test_shaped_link_limits_gloo_to_its_rate_and_cleans_up():
    ok, why = shaped_network_available()
    if not ok:
        pytest.skip(f"no shaped network on this machine: {why}")
    rate_gbit, nbytes = 0.5, 20_000_000
    with ShapedNetwork(2, rate_gbit) as net:
        names = list(net.namespaces) + [net.hub]
        seconds = spawn(_timed_all_reduce, 2, nbytes, rank_setup=net.rank_setup, master_addr=net.address(0))
    sent_bits = 2 * (2 - 1) / 2 * nbytes * 8  # ring all_reduce: 2 (P-1)/P of the buffer per rank and direction
    achieved = sent_bits / max(seconds) / 1e9
    assert 0.5 * rate_gbit < achieved < 1.1 * rate_gbit, f"{achieved:.3f} Gbit/s on a {rate_gbit} Gbit/s link"
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(name in left for name in names), left
