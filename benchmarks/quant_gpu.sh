#!/usr/bin/env bash
# The quantization-table rows that need a GPU (Amazon Computers, Coauthor CS), in one time-boxed run: one
# quant_table.py process per dataset, side by side on the one GPU (each is bound by kernel launches, so two share
# it well; a dozen processes time-slice the GPU and each runs far slower), each stopped at T_QUANT seconds. A stopped run keeps every finished cell
# (quant_table.py writes after each). Results and logs go to $OUT (default benchmarks/results/gpu); then merge:
#
#   GNN_DATA_ROOT=<folder with Amazon/ and Coauthor/ raw files> bash benchmarks/quant_gpu.sh
#   python benchmarks/quant_merge.py $OUT/quant_*.json --shared-device-with "the other dataset's command"
#   python benchmarks/make_results.py
#
# Sizing, measured on an H100 (2026-11-26, both datasets at once): the GCN rows (7 cells x 10 seeds x 300 epochs)
# took 300 s. Degree-Quant cells cost 14-23x an FP32 epoch on the GPU (percentile ranges every step), so a
# SAGE row's DQ-INT8 cell alone took about 7 minutes on Coauthor CS: give each model its own lease, e.g.
# MODELS=sage, then gin, then gat, or METHODS=a2q,degree-aware to fill the learned-bit cells first.
# Do not crowd the GPU: a lease that ran twelve benchmark processes at once (this script for gin, gat and sage, the
# CiteSeer rows, graph-transformer runs) held the GPU at 100 % and each process finished only its FP32 and first A2Q
# cells (2 of 7) in 470 s. Two to four processes per lease.
# Still missing: the cells RESULTS.md's grid marks `not run`, Degree-Quant and degree-aware cells of GIN and GraphSAGE
# (the GAT rows were finished on a CPU core: GAT quantizes N x hidden tensors), e.g. MODELS=gin METHODS=dq-int8,dq-int4.
set -u
OUT=${OUT:-benchmarks/results/gpu}
PY=${PY:-python3}
DATASETS=${DATASETS:-amazon-computers,coauthor-cs}
MODELS=${MODELS:-sage}
METHODS=${METHODS:-none,dq-int8,dq-int4,a2q,degree-aware}
SEEDS=${SEEDS:-10}
: "${GNN_DATA_ROOT:?set GNN_DATA_ROOT to a folder holding the raw Amazon/ and Coauthor/ dataset folders}"
export GNN_DATA_ROOT PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu_device.txt"
# Process each dataset once, before the side-by-side runs would race on the cache.
$PY -c "
from gnn.data.loaders import load_dataset
for name in '$DATASETS'.split(','):
    print('loaded', load_dataset(name).name)
" 2>&1 | grep loaded
for ds in ${DATASETS//,/ }; do
    timeout "${T_QUANT:-500}" $PY benchmarks/quant_table.py --datasets "$ds" --models "$MODELS" --methods "$METHODS" \
        --seeds "$SEEDS" --targets 4,1.7 --degree-targets 4,1.7 --penalty-weight 25 --device cuda \
        --out "$OUT/quant_$ds.json" > "$OUT/quant_$ds.log" 2>&1 &
done
wait
grep -h -v -i -e warn -e sparse_coo -e Processing -e Done "$OUT"/quant_*.log | tail -40
