#!/usr/bin/env bash
# Session 2, H100: GPU tests after the tune() refactor (search rounds), the shard/merge check,
# and the sgemm family after adding OCCUPANCY: a focused exhaustive sweep at 4096^3 and the
# table runs (anneal, budget 256). Logs under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export CUDA_AUTOTUNE_CACHE=/tmp/ca-cache TUNE_EXE=$PWD/.gpu/tune
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/batch2.log"
echo "== GPU tests" | tee -a "$OUT/batch2.log"
timeout 300 ./.gpu/gpu-tests --nocapture --test-threads=1 > "$OUT/gpu-tests.log" 2>&1
grep -E "^test |test result|panicked" "$OUT/gpu-tests.log" | tee -a "$OUT/batch2.log"
timeout 120 ./.gpu/faults-tests --nocapture --test-threads=1 2>&1 | grep -E "^test |test result|panicked" | tee -a "$OUT/batch2.log"
echo "== shard check" | tee -a "$OUT/batch2.log"
OUT=$OUT timeout 200 bash scripts/gpu-shard.sh > /dev/null 2>&1; echo "exit $?" | tee -a "$OUT/batch2.log"
tail -n 40 "$OUT/shard-check.log" >> "$OUT/batch2.log"
echo "== sgemm" | tee -a "$OUT/batch2.log"
S="./.gpu/tune --out $OUT/results --top 5"
run() { echo "== tune $*" | tee -a "$OUT/sgemm2.log"; local t0=$(date +%s); timeout 300 $S "$@" >> "$OUT/sgemm2.log" 2>>"$OUT/stderr.log"; echo "exit $?, wall $(( $(date +%s) - t0 )) s" | tee -a "$OUT/sgemm2.log"; }
run --op sgemm --shape 4096x4096x4096 --strategy exhaustive --param BM=64,128 --param BN=64,128 --param BK=8,16 --param TM=8 --param TN=8 --param VEC=4 --param PAD=4
for shape in 4096x4096x4096 2048x2048x2048 1024x1024x1024 1000x1000x1000 3000x2000x1500 1023x1025x1027; do
  run --op sgemm --shape $shape --strategy anneal --budget 256
done
tar -C "$OUT" -czf "$OUT/results2.tar.gz" results && rm -rf "$OUT/results"
grep -E "^== |^Best:|^Search|cublas_sgemm  |^exit" "$OUT/sgemm2.log" | tee -a "$OUT/batch2.log" | tail -n 40
