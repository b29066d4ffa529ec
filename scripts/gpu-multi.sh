#!/usr/bin/env bash
# Multi-GPU sweep (runs on a machine with several GPUs of one model, e.g. nvidia-h200-x2):
# the same sweeps with --gpus all and --gpus 0, wall time of each. Output in $OUT/multi.log.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export CUDA_AUTOTUNE_CACHE=/tmp/ca-multi-cache TUNE_EXE=$PWD/.gpu/tune
log="$OUT/multi.log"
nvidia-smi --query-gpu=index,name,uuid --format=csv | tee "$log"
T="1000x1000,1024x1024,2048x2048,4096x4096,8192x8192,8191x8191,1000x3000,4096x1024"
M="1024x1024x1024,2048x2048x2048,1000x1000x1000"
sweep() { # label, then args
  local label=$1; shift
  local t0=$(date +%s%N)
  ./.gpu/tune "$@" --out "$OUT/$label" > "$OUT/$label.out" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "== $label: tune $* -> exit $rc, wall $((ms / 1000)).$(printf %03d $((ms % 1000))) s" | tee -a "$log"
  sed -n '/^Summary:/,$p' "$OUT/$label.out" | tee -a "$log"
}
# Warm the cubin cache first so both sides time tuning, not compiling.
./.gpu/tune --op transpose --shape $T --compile-only > /dev/null 2>&1
./.gpu/tune --op matmul --shape $M --compile-only > /dev/null 2>&1
sweep transpose-gpus-all --op transpose --shape $T --gpus all
sweep transpose-gpu0 --op transpose --shape $T --gpus 0
sweep matmul-gpus-all --op matmul --shape $M --block-size 16,32 --gpus all
sweep matmul-gpu0 --op matmul --shape $M --block-size 16,32 --gpus 0
tar -C "$OUT" -czf "$OUT/multi-results.tar.gz" transpose-gpus-all transpose-gpu0 matmul-gpus-all matmul-gpu0 && rm -rf "$OUT"/transpose-gpu* "$OUT"/matmul-gpu*
