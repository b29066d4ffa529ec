#!/usr/bin/env bash
# Session 2, H100: issue 13 lines on the GPU (warm-up from idle, tune check) and sgemm with
# STAGES=3 (cp.async ring). Logs under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export CUDA_AUTOTUNE_CACHE=/tmp/ca-cache TUNE_EXE=$PWD/.gpu/tune
log="$OUT/batch4.log"
T=./.gpu/tune
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee "$log"
echo "== warm-up test" | tee -a "$log"
timeout 120 ./.gpu/gpu-tests the_gpu_is_warmed_up --nocapture 2>&1 | grep -E "^test |Warm-up|test result|panicked" | tee -a "$log"
echo "== idle 20 s, then transpose 1000x1000 twice (warm-up, then not needed)" | tee -a "$log"
sleep 20; nvidia-smi --query-gpu=clocks.sm --format=csv,noheader | tee -a "$log"
for i in 1 2; do
  $T --op transpose --shape 1000x1000 --out $OUT/results 2>>$OUT/stderr.log | grep -E "^(Best|Warm-up|Clocks|Re-measured|Confidence)" | tee -a "$log"
done
echo "== tune check against the run above, then against a db claiming its winner 20% faster" | tee -a "$log"
$T check --db $OUT/results/best.csv --op transpose 2>&1 | tail -n 4 | tee -a "$log"; echo "exit ${PIPESTATUS[0]}" | tee -a "$log"
python3 - "$OUT/results/best.csv" /tmp/edited_best.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in rows: r["median_ms"] = str(float(r["median_ms"]) * 0.8)
w = csv.DictWriter(open(sys.argv[2], "w", newline=""), fieldnames=list(rows[0].keys())); w.writeheader(); w.writerows(rows)
PY
$T check --db /tmp/edited_best.csv --op transpose 2>&1 | tail -n 4 | tee -a "$log"; echo "exit ${PIPESTATUS[0]}" | tee -a "$log"
S="$T --out $OUT/results --top 6"
run() { echo "== tune $*" | tee -a "$OUT/sgemm4.log"; local t0=$(date +%s); timeout 300 $S "$@" >> "$OUT/sgemm4.log" 2>>"$OUT/stderr.log"; echo "exit $?, wall $(( $(date +%s) - t0 )) s" | tee -a "$OUT/sgemm4.log"; }
run --op sgemm --shape 4096x4096x4096 --strategy exhaustive --param LOAD=async --param STAGES=2,3 --param BM=64,128 --param BN=64,128 --param BK=16,32 --param TM=8 --param TN=4,8 --param VEC=4 --param PAD=0,4 --param BOUNDS=specialized
run --op sgemm --shape 4096x4096x4096 --strategy anneal --budget 256
run --op sgemm --shape 2048x2048x2048 --strategy anneal --budget 256
run --op sgemm --shape 1000x1000x1000 --strategy anneal --budget 256
tar -C "$OUT" -czf "$OUT/results4.tar.gz" results && rm -rf "$OUT/results"
grep -E "^== |^Best:|^Search|^Warm-up|cublas_sgemm  |^exit|^ +[0-9]+ +(64|128|32|256) " "$OUT/sgemm4.log" | tee -a "$log" | tail -n 50
