"""Throughput of quant.formats.packing (pack_rows / unpack_rows) and quant.formats.adaptive_package per bitwidth,
one core.

MB/s counts the int8 code bytes (N * F) processed per second (best of ``--repeats``); the issue's target is
>= 100 MB/s for pack and unpack on one CPU core. The codecs are NumPy (single-threaded); torch is pinned to
``--threads`` (default 1) so that nothing else in the process uses a second core. Writes
``benchmarks/results/pack_speed.json``.

    python benchmarks/pack_speed.py [--nodes 131072] [--features 128] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

from benchmarks._common import RESULTS, machine, machine_line, save_results, table_head
from quant.formats.adaptive_package import decode, encode
from quant.formats.packing import code_range, pack_rows, unpack_rows

TARGET_MB_PER_S = 100.0  # issue 3: pack and unpack >= 100 MB/s of codes on one CPU core


def best_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def random_codes(rng: np.random.Generator, n: int, f: int, bits: int, density: float = 1.0) -> np.ndarray:
    qmax = code_range(bits)[1]
    codes = rng.integers(-qmax, qmax + 1, size=(n, f), dtype=np.int8)
    return codes if density >= 1.0 else (codes * (rng.random((n, f)) < density)).astype(np.int8)


def _mixed_codes(rng: np.random.Generator, bits: np.ndarray, f: int) -> np.ndarray:
    """(N, F) int8 codes, row i uniform in the symmetric ``bits[i]``-bit range."""
    qmax = np.array([code_range(int(b))[1] for b in range(9)])[bits]  # (N,)
    return rng.integers(-qmax[:, None], qmax[:, None] + 1, size=(bits.size, f)).astype(np.int8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=131072, help="rows per run (default 131072)")
    ap.add_argument("--features", type=int, default=128, help="codes per row (default 128)")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats, best kept (default 3)")
    ap.add_argument("--ap-nodes", type=int, default=16384, help="rows for the Adaptive-Package codec (default 16384)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1: one core, as the target)")
    args = ap.parse_args()
    if args.threads < 1:
        ap.error(f"--threads {args.threads}: give a positive number of torch threads (1 = one core, the target's)")
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    load_start = os.getloadavg()[0]
    rows = []
    for bits in [*range(1, 9), "mixed"]:  # "mixed": per-node bitwidths uniform in 0..8
        if bits == "mixed":
            bw = rng.integers(0, 9, size=args.nodes).astype(np.uint8)
            codes = _mixed_codes(rng, bw, args.features)
        else:
            codes = random_codes(rng, args.nodes, args.features, bits)
            bw = np.full(args.nodes, bits, dtype=np.uint8)
        packed = pack_rows(codes, bw)
        assert np.array_equal(unpack_rows(packed), codes)
        mb = codes.nbytes / 1e6
        t_pack = best_seconds(lambda c=codes, b=bw: pack_rows(c, b), args.repeats)
        t_unpack = best_seconds(lambda p=packed: unpack_rows(p), args.repeats)
        ap_bits = bw[: args.ap_nodes]
        ap_codes = (codes[: args.ap_nodes] * (rng.random((args.ap_nodes, args.features)) < 0.5)).astype(np.int8)
        stream = encode(ap_codes, ap_bits)
        assert np.array_equal(decode(stream), ap_codes)
        ap_mb = ap_codes.nbytes / 1e6
        t_enc = best_seconds(lambda c=ap_codes, b=ap_bits: encode(c, b), args.repeats)
        t_dec = best_seconds(lambda s=stream: decode(s), args.repeats)
        rows.append({
            "bits": bits, "codes_mb": mb, "packed_bytes": packed.payload_bytes,
            "pack_mb_per_s": mb / t_pack, "unpack_mb_per_s": mb / t_unpack,
            "ap_density": 0.5, "ap_codes_mb": ap_mb, "ap_total_bytes": sum(stream.nbytes.values()),
            "ap_encode_mb_per_s": ap_mb / t_enc, "ap_decode_mb_per_s": ap_mb / t_dec,
        })
        r = rows[-1]
        print(f"b={bits!s:>5}: pack {r['pack_mb_per_s']:8.1f} MB/s  unpack {r['unpack_mb_per_s']:8.1f} MB/s"
              f"  | AP encode {r['ap_encode_mb_per_s']:6.1f} MB/s  decode {r['ap_decode_mb_per_s']:6.1f} MB/s")
    result = {
        "benchmark": "pack_speed", "nodes": args.nodes, "features": args.features, "repeats": args.repeats,
        "ap_nodes": args.ap_nodes, "target_mb_per_s": TARGET_MB_PER_S, "numpy": np.__version__, "machine": machine(),
        "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]},  # shared machine: context
        "command": "python benchmarks/pack_speed.py " + " ".join(sys.argv[1:]), "results": rows,
    }
    print(f"wrote {save_results('pack_speed', result)} (results dir {RESULTS})")


def render(res: dict) -> list[str]:
    target = res.get("target_mb_per_s", 100.0)
    m = res.get("machine", {})
    lines = ["## Bit-packing and Adaptive-Package codec throughput", "",
             f"Command: `{res.get('command', 'python benchmarks/pack_speed.py')}` (file: "
             "`benchmarks/results/pack_speed.json`). MB/s of int8 codes processed per second, best of "
             f"{res.get('repeats')} repeats: `quant.formats.packing` on {res.get('nodes')} rows x "
             f"{res.get('features')} codes, the Adaptive-Package codec (`quant.formats.adaptive_package`) on the "
             f"first {res.get('ap_nodes')} rows at half "
             "density. `mixed`: per-row bitwidths uniform in 0..8. Packed bytes: the payload (1-bit rows are all "
             "zero and store nothing).", "",
             *table_head("bits", "pack MB/s", "unpack MB/s", "packed bytes", "AP encode MB/s", "AP decode MB/s",
                         "AP bytes")]
    rows = res.get("results", [])
    for r in rows:
        lines.append(f"| {r['bits']} | {r['pack_mb_per_s']:.0f} | {r['unpack_mb_per_s']:.0f} | "
                     f"{r['packed_bytes']:,} | {r['ap_encode_mb_per_s']:.0f} | {r['ap_decode_mb_per_s']:.0f} | "
                     f"{r['ap_total_bytes']:,} |")
    if rows:
        slowest = min(min(r["pack_mb_per_s"], r["unpack_mb_per_s"]) for r in rows)
        verdict = "met" if slowest >= target else "missed"
        lines += ["", f"Slowest pack or unpack: {slowest:.0f} MB/s (target >= {target:.0f} MB/s on one core: "
                      f"{verdict}). Torch threads {m.get('threads')} of {m.get('cpu_count')} cores; 1-min load "
                      f"average {res.get('load_average_1min', {}).get('start', float('nan')):.1f} at the start."]
    return lines + ["", machine_line(res, sort_keys=True), ""]


if __name__ == "__main__":
    main()
