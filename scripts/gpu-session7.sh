#!/usr/bin/env bash
# Issue 10, session 7: REPACK=1 (a prologue kernel copies A and B into rows padded to 4 floats,
# timed with the GEMM, so float4 kernels run where K or N is not a multiple of 4).
#   1. GPU tests: the repacked variants verify (3 shapes, every bounds mode), and the sgemm
#      searches still verify every measured variant;
#   2. 1023x1025x1027: the default search (auto = anneal, 256 variants) over the space that
#      now holds REPACK, then a focused exhaustive sweep that holds session 4's VEC=1 winners
#      and the 1000^3 winner's float4 tile with REPACK=1 side by side (same run, same roof);
#   3. two more shapes with K and N not multiples of 4, default search.
# Results: results/session7/. Logs go to $OUT (default ./gpu-out); everything is tarred into
# $OUT/session7.tar.gz (the device tool returns at most 8 files, two folders deep).
# Usage: bash scripts/gpu-session7.sh [tests|tune|all]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache}
log="$OUT/session7.log"
. "$(dirname "$0")/gpu-run.sh"
what=${1:-all}
if [ "$what" != tune ]; then
  TUNE_EXE=$PWD/.gpu/tune timeout 400 ./.gpu/gpu-tests --test-threads 1 \
    repacked_sgemm_variants_verify sgemm_searches_verify 2>&1 | tee "$OUT/gpu-tests.log" | tail -15
fi
if [ "$what" != tests ]; then
  run --op sgemm --shape 1023x1025x1027
  run --op sgemm --shape 1023x1025x1027 --strategy exhaustive --param BM=64,128 --param BN=32,64 \
    --param BK=16,32 --param TM=8 --param TN=4 --param WARP_N=8,16 --param VEC=1,4 --param PAD=0,4 \
    --param STAGES=2,3,4 --param LOAD=async --param BOUNDS=specialized,edge --param REPACK=0,1
  # Only while the call has time left (a device call ends at 600 s, and this tars at the end).
  for shape in 2047x2049x2051 999x1001x1003; do
    [ $SECONDS -lt 400 ] && run --op sgemm --shape $shape
  done
fi
tar czf "$OUT/session7.tar.gz" -C "$OUT" --exclude session7.tar.gz . 2>/dev/null
echo "== summary" | tee -a "$log"
grep -E "^== tune|^Best|of cublas|verified configurations|exit [0-9]" "$log" | tail -40
