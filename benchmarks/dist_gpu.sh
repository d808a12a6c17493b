#!/usr/bin/env bash
# GPU readiness of the distributed and quantized GNN stack, in one short run on a machine with a CUDA GPU:
#   1. distributed.train with NCCL at world size 1 (fp32 and int1 exchange settings, Cora, 30 epochs);
#   2. every halo codec on CUDA tensors: round trip against the same codec on CPU (lossless codecs bit-equal, the
#      stochastic ones within one step of their grid) and encode + decode time per MB, CUDA against CPU;
#   3. quantized GNN training (A2Q, 1.7 bits) on CUDA against CPU, Cora and Coauthor CS: ms per epoch, the ratio,
#      and the test accuracy of both.
# Everything lands in $OUT (default benchmarks/results/gpu_dist) with the device name; nothing is merged into
# RESULTS.md automatically. DEVICE=cpu runs the same steps with gloo on the CPU (the smoke test of this script,
# tests/distributed/test_gpu_script.py). Expected wall time on one GPU: under 5 minutes (the CPU reference epochs
# dominate; DATASETS=cora halves it).
#
#   bash benchmarks/dist_gpu.sh             # on the GPU machine
#   DEVICE=cpu EPOCHS=2 DATASETS=cora bash benchmarks/dist_gpu.sh   # the smoke test, anywhere
set -euo pipefail
OUT=${OUT:-benchmarks/results/gpu_dist}
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
EPOCHS=${EPOCHS:-30}
DATASETS=${DATASETS:-cora,coauthor-cs}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
if [ "$DEVICE" = cuda ]; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
else
    echo "cpu ($(nproc) cores)" | tee "$OUT/device.txt"
fi

echo "== 1. distributed.train, world size 1, device $DEVICE"
for codec in fp32 int1; do
    $PY -m torch.distributed.run --nproc-per-node 1 --standalone -m distributed.train --dataset cora \
        --device "$DEVICE" --exchange "$codec" --epochs "$EPOCHS" --hidden 64 --log-every 0 \
        --out "$OUT/dist_world1_$codec.json" > "$OUT/dist_world1_$codec.log" 2>&1
    $PY -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], 'best val', r['best_val_acc'], \
'test at best val', r['test_acc_at_best_val'])" "$OUT/dist_world1_$codec.json" "$codec"
done

echo "== 2. halo codecs on $DEVICE tensors against CPU"
$PY - "$DEVICE" "$OUT/codecs.json" <<'EOF'
import json, sys, time
import torch
from distributed import codecs

device, out = sys.argv[1], sys.argv[2]
x = torch.randn(20000, 256, generator=torch.Generator().manual_seed(0))
rows = []
def timed(fn, dev):
    fn()  # warm-up
    if dev == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(5):
        y = fn()
    if dev == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / 5, y
for codec in codecs.CODECS:
    xd = x.to(device)
    s_dev, dec = timed(lambda: codecs.decode(codecs.encode(xd, codec), codec, *x.shape), device)
    s_cpu, ref = timed(lambda: codecs.decode(codecs.encode(x, codec), codec, *x.shape), "cpu")
    assert dec.device.type == torch.device(device).type, (codec, dec.device)
    dec = dec.cpu().to(ref.dtype)
    if codec in ("fp32", "fp64", "fp16"):  # casts: the same bits on both devices
        ok = bool(torch.equal(dec, ref))
    elif codec == "int1-2c":  # row means summed in another order: centroids may differ by an fp16 ulp
        ok = bool(((dec - ref).abs() <= 2e-3 * x.abs().amax()).float().mean() >= 0.9999)
    else:  # stochastic rounding draws differ by device: both within one step of the row's grid
        step = (x.amax(1) - x.amin(1)) / ((1 << codecs.bits_of(codec)) - 1)
        ok = bool(((dec - x).abs() <= step[:, None] * 1.001 + 1e-3).all())
    mb = x.numel() * 4 / 1e6
    rows.append({"codec": codec, "matches_cpu": ok, f"{device}_ms": 1e3 * s_dev, "cpu_ms": 1e3 * s_cpu,
                 f"{device}_MB_per_s": mb / s_dev, "speedup_vs_cpu": s_cpu / s_dev})
    print(f"{codec:8s} matches CPU: {ok}  {device} {1e3 * s_dev:8.2f} ms  cpu {1e3 * s_cpu:8.2f} ms  "
          f"x{s_cpu / s_dev:.1f}")
json.dump({"device": device, "shape": list(x.shape), "rows": rows}, open(out, "w"), indent=1)
assert all(r["matches_cpu"] for r in rows), "a codec decodes differently on the device"
EOF

echo "== 3. quantized GNN training (A2Q 1.7 bits) on $DEVICE against CPU"
for ds in ${DATASETS//,/ }; do
    for dev in "$DEVICE" cpu; do
        [ "$dev" = cpu ] && [ "$DEVICE" = cpu ] && [ -d "$OUT/gnn_${ds}_cpu" ] && continue
        $PY -m gnn.train --dataset "$ds" --model gcn --quant a2q --target-bits 1.7 --seeds 1 --epochs "$EPOCHS" \
            --device "$dev" --run-dir "$OUT/gnn_${ds}_$dev" --overwrite > "$OUT/gnn_${ds}_$dev.log" 2>&1
    done
done
$PY - "$DEVICE" "$OUT" "$DATASETS" <<'EOF'
import json, sys
from pathlib import Path
device, out, datasets = sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(",")
rows = []
for ds in datasets:
    r = {dev: json.loads((out / f"gnn_{ds}_{dev}" / "results.json").read_text())["summary"]
         for dev in dict.fromkeys((device, "cpu"))}
    row = {"dataset": ds, **{f"{dev}_ms_per_epoch": s["ms_per_epoch"] for dev, s in r.items()},
           **{f"{dev}_test_acc": s["test_acc"]["mean"] for dev, s in r.items()}}
    row["speedup_vs_cpu"] = r["cpu"]["ms_per_epoch"] / r[device]["ms_per_epoch"]
    rows.append(row)
    print(json.dumps(row))
(out / "gnn_device_vs_cpu.json").write_text(json.dumps({"device": device, "rows": rows}, indent=1))
EOF
echo "written to $OUT"
