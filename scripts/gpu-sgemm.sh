#!/usr/bin/env bash
# On the GPU machine (binaries from scripts/gpu-build.sh in .gpu/): the sgemm register-tiled
# family (issue 10). Exhaustive at 1024^3 (for the strategy replay), searches elsewhere.
# Usage: bash scripts/gpu-sgemm.sh [search|exhaustive|all]; logs and CSVs under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
part=${1:-all}
mkdir -p "$OUT/results"
export CUDA_AUTOTUNE_CACHE=/tmp/ca-cache
log="$OUT/sgemm.log"
run() {
  echo | tee -a "$log"
  echo "== tune $*" | tee -a "$log"
  local t0=$(date +%s%N)
  timeout 420 ./.gpu/tune "$@" --out "$OUT/results" 2>>"$OUT/stderr.log" | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "exit $rc, wall $((ms / 1000)).$(printf %03d $((ms % 1000))) s" | tee -a "$log"
}
if [ "$part" = search ] || [ "$part" = all ]; then
  run --op sgemm --shape 4096x4096x4096 --strategy anneal --budget 256 --top 5
  run --op sgemm --shape 1000x1000x1000 --strategy anneal --budget 256 --top 5
  run --op sgemm --shape 2048x2048x2048 --strategy anneal --budget 256 --top 5
  run --op sgemm --shape 3000x2000x1500 --strategy anneal --budget 256 --top 5
  run --op sgemm --shape 1023x1025x1027 --strategy anneal --budget 256 --top 5
fi
if [ "$part" = exhaustive ] || [ "$part" = all ]; then
  run --op sgemm --shape 1024x1024x1024 --strategy exhaustive --top 5
fi
tar -C "$OUT" -czf "$OUT/sgemm-results.tar.gz" results
grep -E "^== |^Best:|^Search|^Confidence|cublas|^exit|Top " "$log" | tail -n 60
