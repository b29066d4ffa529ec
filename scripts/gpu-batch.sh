#!/usr/bin/env bash
# Runs on the GPU machine (no Rust there): GPU tests, then the tuning runs, from binaries
# built here by scripts/gpu-build.sh into .gpu/. Logs and CSVs go to $OUT (default ./gpu-out).
# Usage: bash scripts/gpu-batch.sh [quick]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT/results"
export CUDA_AUTOTUNE_CACHE=/tmp/ca-cache TUNE_EXE=$PWD/.gpu/tune
rm -rf "$CUDA_AUTOTUNE_CACHE"
log="$OUT/runs.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$log"
echo "== GPU tests" | tee -a "$log"
./.gpu/gpu-tests --nocapture --test-threads=1 2>&1 | tee "$OUT/gpu-tests.log" | grep -E "^test |test result|verified, best" | tee -a "$log"
./.gpu/faults-tests --nocapture --test-threads=1 2>&1 | tee -a "$OUT/gpu-tests.log" | grep -E "^test |test result" | tee -a "$log"
rm -rf "$CUDA_AUTOTUNE_CACHE"   # the first tuning run below starts with a cold cubin cache
run() {
  echo | tee -a "$log"
  echo "== tune $* (cubin cache: $(ls $CUDA_AUTOTUNE_CACHE/cubin 2>/dev/null | wc -l) entries)" | tee -a "$log"
  local t0=$(date +%s%N)
  ./.gpu/tune "$@" --out "$OUT/results" 2>>"$OUT/stderr.log" | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "exit $rc, wall $((ms / 1000)).$(printf %03d $((ms % 1000))) s" | tee -a "$log"
}
run --op transpose --shape 1000x1000
run --op transpose --shape 1000x1000
run --op transpose --shape 1000x1000 --in-process --no-cache
[ "${1:-}" = quick ] && exit 0
run --op transpose --shape 1024x1024
run --op transpose --shape 8192x8192
run --op transpose --shape 4096x4096
run --op transpose --shape 8191x8191
run --op transpose --shape 1000x3000
run --op matmul --shape 1024x1024x1024 --block-size 16,32
run --op matmul --shape 4096x4096x4096 --block-size 16,32
run --op matmul --shape 1000x1000x1000 --block-size 16,32
run --op matmul --shape 1024x1024x1024
OUT=$OUT bash scripts/bench-speed.sh > /dev/null
# Same winner on repeated runs? Five runs each, without and with the interleaved confirmation.
for shape in 1000x1000 4096x4096; do
  for rounds in 0 50; do
    for i in 1 2 3 4 5; do
      echo "== repeat $shape --confirm-rounds $rounds #$i" >> "$OUT/repeat.log"
      ./.gpu/tune --op transpose --shape $shape --confirm-rounds $rounds --out /tmp/repeat 2>/dev/null \
        | grep -E "^Best:|^Confidence:" >> "$OUT/repeat.log"
    done
  done
done
tar -C "$OUT" -czf "$OUT/results.tar.gz" results && rm -rf "$OUT/results"
grep -E "^== tune|^Best:|^exit|^Time:" "$log"
cat "$OUT/tuning_speed.md"
grep -E "^== repeat|^Best:" "$OUT/repeat.log" | sed 's/  [0-9.]* GB.*//' 
