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
#   more: the other GPU tests (every kernel launch now goes through the prologue-aware
#      path), the main job, 999x1001x1003, and Nsight Compute durations of sgemm_repack and
#      sgemm for the 1023x1025x1027 winner.
#   ab:  the repack kernel before (.gpu/t-v1: a copy of templates/ at babaf22, a thread per
#      float4 and row) and after (templates/ then: four rows a thread, loads first; no gain,
#      reverted, so templates/ is v1 again: results/session7/h100_repack_ab_rows4.log), same
#      configurations, alternating twice, then Nsight Compute durations of the new one.
#   final: after the review's fixes (scratch poisoned with NaN before every verifying run;
#      REPACK copies A only when K % 4 != 0; float4 stores to C when N % 4 == 0): the
#      repacked-variant test (now also 96x66x64), wrong results, matmul, and the two
#      shapes again (default search).
# Usage: bash scripts/gpu-session7.sh [tests|tune|all|more|ab|final]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache}
log="$OUT/session7.log"
. "$(dirname "$0")/gpu-run.sh"
what=${1:-all}
if [ "$what" = final ]; then
  TUNE_EXE=$PWD/.gpu/tune timeout 330 ./.gpu/gpu-tests --test-threads 1 repacked_sgemm wrong_results \
    matmul_variants 2>&1 | tee "$OUT/gpu-tests-final.log" | grep -E "^test |test result|panicked"
  for shape in 1023x1025x1027 999x1001x1003; do
    [ $SECONDS -lt 420 ] && run --op sgemm --shape $shape
  done
  tar czf "$OUT/session7-final.tar.gz" -C "$OUT" --exclude '*.tar.gz' . 2>/dev/null
  grep -E "^== tune|cublas_sgemm  |^Best|exit [0-9]" "$log" | tail -10
  exit 0
fi
if [ "$what" = ab ]; then
  w1023=(--param BM=64,128 --param BN=32 --param BK=16,32 --param TM=8 --param TN=4 --param WARP_N=8 --param VEC=4
    --param PAD=0,4 --param STAGES=2,3 --param LOAD=async --param BOUNDS=specialized --param REPACK=1)
  w999=(--param BM=64 --param BN=64 --param BK=32 --param TM=8 --param TN=4 --param WARP_N=16 --param VEC=4
    --param PAD=0 --param STAGES=2,3 --param LOAD=async --param BOUNDS=specialized,edge --param REPACK=1)
  for round in 1 2; do
    for tpl in v1 v2; do
      dir=templates; [ $tpl = v1 ] && dir=.gpu/t-v1
      RESULTS=$OUT/ab-$tpl-$round run --op sgemm --templates $dir --strategy exhaustive --shape 1023x1025x1027 "${w1023[@]}"
      RESULTS=$OUT/ab-$tpl-$round run --op sgemm --templates $dir --strategy exhaustive --shape 999x1001x1003 "${w999[@]}"
    done
  done
  for tpl in v1 v2; do
    dir=templates; [ $tpl = v1 ] && dir=.gpu/t-v1
    timeout 60 ncu --clock-control none -k regex:^sgemm_repack -c 3 --metrics gpu__time_duration.sum \
      ./.gpu/tune --op sgemm --templates $dir --shape 999x1001x1003 --strategy exhaustive --reps 3 --warmup 1 \
      --out /tmp/ncu-results "${w999[@]}" --param STAGES=2 --param BOUNDS=edge >"$OUT/ncu-repack-$tpl.txt" 2>&1
    echo "== ncu $tpl" | tee -a "$log"; grep -E "gpu__time" "$OUT/ncu-repack-$tpl.txt" | tee -a "$log"
  done
  tar czf "$OUT/session7-ab.tar.gz" -C "$OUT" --exclude '*.tar.gz' . 2>/dev/null
  grep -E "^== tune|^Best|exit [0-9]" "$log" | tail -24
  exit 0
fi
if [ "$what" = more ]; then
  TUNE_EXE=$PWD/.gpu/tune timeout 330 ./.gpu/gpu-tests --test-threads 1 --skip every_variant \
    --skip repacked_sgemm --skip sgemm_searches 2>&1 | tee "$OUT/gpu-tests-more.log" | grep -E "^test |test result"
  run --op transpose --shape 1000x1000
  [ $SECONDS -lt 420 ] && run --op sgemm --shape 999x1001x1003
  w=(--param BM=64 --param BN=32 --param BK=32 --param TM=8 --param TN=4 --param WARP_N=8 --param VEC=4
    --param PAD=4 --param STAGES=2 --param LOAD=async --param BOUNDS=specialized --param REPACK=1)
  [ $SECONDS -lt 500 ] && timeout 60 ncu --clock-control none -k regex:^sgemm -c 6 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    ./.gpu/tune --op sgemm --shape 1023x1025x1027 --strategy exhaustive --reps 3 --warmup 1 --out /tmp/ncu-results \
    "${w[@]}" >"$OUT/ncu-repack.txt" 2>&1
  grep -E "sgemm|gpu__time|dram__bytes" "$OUT/ncu-repack.txt" | head -30 | tee -a "$log"
  tar czf "$OUT/session7-more.tar.gz" -C "$OUT" --exclude '*.tar.gz' . 2>/dev/null
  grep -E "^== tune|^Best|exit [0-9]" "$log" | tail -8
  exit 0
fi
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
