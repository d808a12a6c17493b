"""Encode and decode time of the halo-row codecs (`distributed.codecs`) on one CPU thread.

    python benchmarks/halo_codec_speed.py [--rows 45000] [--features 64] [--repeats 20]

Rows are float32 N(0, 1) blocks of (``--rows``, ``--features``), about one rank's halo rows per epoch on the
R-MAT 17 graph of ``benchmarks/dist_time.py`` (hidden 64). Per codec: the median of ``--repeats`` calls of
``encode`` and of ``decode`` (one warm-up call each), and their sum relative to the fp32 codec's (a plain copy) in
the same run. Writes ``benchmarks/results/halo_codec_speed.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

from benchmarks._common import machine, machine_line, save_results, table_head, table_row
from distributed import codecs


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up: first-call allocations and kernel selection
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=45000, help="rows per block (default 45000)")
    ap.add_argument("--features", type=int, default=64, help="features per row (default 64)")
    ap.add_argument("--repeats", type=int, default=20, help="timed calls per codec, median kept (default 20)")
    args = ap.parse_args(argv)
    if args.rows < 1 or args.features < 1 or args.repeats < 1:
        ap.error("--rows, --features and --repeats must be positive")
    torch.set_num_threads(1)
    x = torch.randn(args.rows, args.features, generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)
    load_start = os.getloadavg()[0]
    rows = []
    for codec in codecs.CODECS:
        payload = codecs.encode(x, codec, gen)
        enc = median_ms(lambda c=codec: codecs.encode(x, c, gen), args.repeats)
        dec = median_ms(lambda c=codec, p=payload: codecs.decode(p, c, args.rows, args.features), args.repeats)
        rows.append({"codec": codec, "encode_ms": enc, "decode_ms": dec, "payload_bytes": int(payload.numel())})
        print(f"{codec:>8}: encode {enc:7.2f} ms  decode {dec:7.2f} ms  ({payload.numel():,} B)")
    fp32 = next(r for r in rows if r["codec"] == "fp32")
    for r in rows:
        r["vs_fp32"] = (r["encode_ms"] + r["decode_ms"]) / (fp32["encode_ms"] + fp32["decode_ms"])
    result = {"command": "python benchmarks/halo_codec_speed.py " + " ".join(argv if argv is not None
                                                                          else sys.argv[1:]),
              "rows": args.rows, "features": args.features, "repeats": args.repeats, "machine": machine(),
              "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]}, "results": rows}
    print(f"wrote {save_results('halo_codec_speed', result)}")
    return result


def render(res: dict) -> list[str]:
    lines = ["### Halo codec speed (one thread)", "",
             f"Command: `{res['command']}` (file: `benchmarks/results/halo_codec_speed.json`). "
             f"({res['rows']}, {res['features']}) float32 rows, median of {res['repeats']} calls each; "
             f"'vs fp32' = (encode + decode) / that of the fp32 codec (a copy) in the same run. 1-minute load "
             f"average {res['load_average_1min']['start']:.1f} at the start.", "",
             *table_head("codec", "encode (ms)", "decode (ms)", "payload bytes", "vs fp32")]
    lines += [table_row(r["codec"], f"{r['encode_ms']:.2f}", f"{r['decode_ms']:.2f}", f"{r['payload_bytes']:,}",
                        f"{r['vs_fp32']:.1f}x") for r in res["results"]]
    return lines + ["", machine_line(res), ""]


if __name__ == "__main__":
    main()
