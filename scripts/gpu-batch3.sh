#!/usr/bin/env bash
# Session 2, H100: sgemm with LOAD=async (cp.async). The GPU sgemm test (random/anneal/genetic
# samples of every parameter incl. LOAD at odd shapes, all verified), a focused exhaustive
# sweep of async variants at 4096^3, then the table shapes (anneal, budget 256).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export CUDA_AUTOTUNE_CACHE=/tmp/ca-cache TUNE_EXE=$PWD/.gpu/tune
log="$OUT/batch3.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee "$log"
timeout 200 ./.gpu/gpu-tests sgemm --nocapture --test-threads=1 2>&1 | grep -E "^test |test result|panicked|failures" | tee -a "$log"
S="./.gpu/tune --out $OUT/results --top 8"
run() { echo "== tune $*" | tee -a "$OUT/sgemm3.log"; local t0=$(date +%s); timeout 300 $S "$@" >> "$OUT/sgemm3.log" 2>>"$OUT/stderr.log"; echo "exit $?, wall $(( $(date +%s) - t0 )) s" | tee -a "$OUT/sgemm3.log"; }
run --op sgemm --shape 4096x4096x4096 --strategy exhaustive --param LOAD=async --param BM=64,128 --param BN=64,128 --param BK=8,16,32 --param TM=8 --param TN=4,8 --param VEC=4 --param PAD=0,4 --param BOUNDS=specialized
for shape in 4096x4096x4096 2048x2048x2048 1024x1024x1024 1000x1000x1000 3000x2000x1500 1023x1025x1027; do
  run --op sgemm --shape $shape --strategy anneal --budget 256
done
tar -C "$OUT" -czf "$OUT/results3.tar.gz" results && rm -rf "$OUT/results"
grep -E "^== |^Best:|^Search|cublas_sgemm  |^exit|^ +[0-9]+ +(64|128|32|256) " "$OUT/sgemm3.log" | tee -a "$log" | tail -n 60
