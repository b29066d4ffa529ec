#!/usr/bin/env bash
# Session 11 on the GPU machine (run from the repo root with .gpu/ carried).
#   first: issue 10's open checks after session 10: the windowed GPU test (every WINDOWS=1 and
#          REPACK=1 variant verified at odd shapes), the default sgemm search (WINDOWS=0,1 in
#          the space) at 2047x2049x2051, 999x1001x1003 and 1023x1025x1027 with results/best.csv
#          carried in (one copy, so every search both warm-starts from it and adds its row), the
#          space setup time after session 10's expression cache, and the main job.
#   ksplit: KSPLIT=2,4 (warps that split each slice's k steps) verified through the CLI at small
#           odd shapes on every load path; then the same tiles with KSPLIT=1,2 (and 4 where
#           valid), exhaustive, same run, at 999x1001x1003, 1000x1000x1000, 1023x1025x1027 and
#           2047x2049x2051.
#   wide: WINDOWS=1 over a wide exhaustive sweep of tiles (BK 8-32, TM and TN 4/8, WARP_N 4-16,
#         PAD 0/4, STAGES 2/3) at 2047x2049x2051 and 999x1001x1003 (session 10's 384-tile sweep
#         ran before interior slices stopped checking B), then KSPLIT=1,2 on the tiles near the
#         top at 999x1001x1003.
#   confirm: the KSPLIT GPU test; the wide sweeps' leading tiles re-run three times each at
#            2047x2049x2051 and 999x1001x1003 (cuBLAS re-timed every run); the default search at
#            2047x2049x2051 with results/best.csv (now holding the wide sweep's winner) carried
#            in; the main job.
#   tests: FFMA orders and OCCUPANCY=16 on the leading windowed tiles at 999x1001x1003, then the
#          whole GPU test suite.
#   helper: after the partial float4s of A and B went through one helper (copy4_range): the
#           windowed GPU test and one round of `confirm`'s leading tiles.
#   helperab: the same leading tiles, the helper build (.gpu/tune-helper) and the build without
#             it (.gpu/tune), alternating, two rounds, same machine.
# Logs go to $OUT (default ./gpu-out), tarred into $OUT/session11-<mode>.tar.gz (the device
# tool returns at most 8 files).
# Usage: bash scripts/gpu-session11.sh [first|ksplit|wide|confirm|tests|helper|helperab]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache}
what=${1:-first}
log="$OUT/session11-$what.log"
. "$(dirname "$0")/gpu-run.sh"
if [ "$what" = first ]; then
  TUNE_EXE=$PWD/.gpu/tune timeout 240 ./.gpu/gpu-tests --test-threads 1 windowed 2>&1 \
    | tee "$OUT/gpu-tests-windowed.log" | grep -E "^test |test result|panicked|failed"
  mkdir -p "$OUT/default" && cp results/best.csv "$OUT/default/best.csv"
  for shape in 2047x2049x2051 999x1001x1003 1023x1025x1027; do
    [ $SECONDS -lt 430 ] && RESULTS=$OUT/default run --op sgemm --shape $shape
  done
  [ $SECONDS -lt 540 ] && RESULTS=$OUT/main run --op transpose --shape 1000x1000
fi
if [ "$what" = ksplit ]; then
  for shape in 97x65x47 130x64x66 70x131x257 128x128x128 9x37x5 200x133x131; do
    for load in "LOAD=regs --param STAGES=1,2 --param BK=16 --param VEC=1,4 --param WINDOWS=0 --param REPACK=0" \
                "LOAD=async --param STAGES=2,3 --param BK=16,32 --param VEC=1,4 --param WINDOWS=0,1 --param REPACK=0,1"; do
      RESULTS=$OUT/verify run --op sgemm --shape $shape --strategy exhaustive --param KSPLIT=2,4 \
        --param BM=32,64 --param BN=32,64 --param TM=8 --param TN=4 --param WARP_N=8 --param PAD=0 \
        --param BOUNDS=always,edge --param $load --reps 3 --confirm-rounds 0 --no-pruned-rows \
        | grep -E "verified|failed|rror" | head -3
    done
  done
  sweep=(--strategy exhaustive --param BM=32,64,128 --param BN=32,64,128 --param BK=16,32 --param TM=8 --param TN=4
    --param WARP_N=8,16 --param PAD=0 --param STAGES=2,3 --param LOAD=async --param VEC=4 --param BOUNDS=specialized
    --param KSPLIT=1,2,4)
  for shape in 999x1001x1003 1000x1000x1000 1023x1025x1027 2047x2049x2051; do
    w=(--param WINDOWS=1 --param REPACK=0); [ $shape = 1000x1000x1000 ] && w=(--param WINDOWS=0 --param REPACK=0)
    [ $SECONDS -lt 500 ] && RESULTS=$OUT/sweep run --op sgemm --shape $shape "${sweep[@]}" "${w[@]}"
  done
fi
if [ "$what" = wide ]; then
  wide=(--strategy exhaustive --param WINDOWS=1 --param REPACK=0 --param LOAD=async --param VEC=4
    --param BM=32,64,128 --param BN=32,64,128 --param BK=8,16,32 --param TM=4,8 --param TN=4,8 --param WARP_N=4,8,16
    --param PAD=0,4 --param STAGES=2,3 --param BOUNDS=specialized)
  for shape in 2047x2049x2051 999x1001x1003; do
    [ $SECONDS -lt 400 ] && RESULTS=$OUT/wide run --op sgemm --shape $shape "${wide[@]}"
  done
  [ $SECONDS -lt 480 ] && RESULTS=$OUT/ks run --op sgemm --shape 999x1001x1003 --strategy exhaustive --param WINDOWS=1 \
    --param REPACK=0 --param LOAD=async --param VEC=4 --param BM=32,64 --param BN=32,64,128 --param BK=16,32 --param TM=4,8 \
    --param TN=4,8 --param WARP_N=8,16 --param PAD=0 --param STAGES=2,3 --param BOUNDS=specialized --param KSPLIT=1,2
fi
if [ "$what" = confirm ] || [ "$what" = helper ]; then
  t=ksplit; [ "$what" = helper ] && t=windowed
  TUNE_EXE=$PWD/.gpu/tune timeout 300 ./.gpu/gpu-tests --test-threads 1 $t 2>&1 \
    | tee "$OUT/gpu-tests-$t.log" | grep -E "^test |test result|panicked|failed"
  lead=(--strategy exhaustive --param WINDOWS=1 --param REPACK=0 --param LOAD=async --param VEC=4 --param TM=8
    --param PAD=0 --param STAGES=3 --param BOUNDS=specialized)
  rounds="1 2 3"; [ "$what" = helper ] && rounds=1
  for round in $rounds; do
    RESULTS=$OUT/lead-$round run --op sgemm --shape 2047x2049x2051 "${lead[@]}" --param BM=64 --param BN=64 \
      --param BK=16 --param TN=4,8 --param WARP_N=4,8,16
    RESULTS=$OUT/lead-$round run --op sgemm --shape 999x1001x1003 "${lead[@]}" --param BM=32 --param BN=64 \
      --param BK=16 --param TN=4 --param WARP_N=8,16
  done
  if [ "$what" = confirm ]; then
    mkdir -p "$OUT/default" && cp results/best.csv "$OUT/default/best.csv"
    [ $SECONDS -lt 450 ] && RESULTS=$OUT/default run --op sgemm --shape 2047x2049x2051
    [ $SECONDS -lt 540 ] && RESULTS=$OUT/main run --op transpose --shape 1000x1000
  fi
fi
if [ "$what" = tests ]; then
  RESULTS=$OUT/order run --op sgemm --shape 999x1001x1003 --strategy exhaustive --param WINDOWS=1 --param REPACK=0 \
    --param LOAD=async --param VEC=4 --param BM=32,64 --param BN=64,128 --param BK=16 --param TM=8 --param TN=4 \
    --param WARP_N=8,16 --param PAD=0 --param STAGES=2,3 --param BOUNDS=specialized --param ORDER=row,snake,snakek \
    --param OCCUPANCY=0,16
  TUNE_EXE=$PWD/.gpu/tune timeout $((590 - SECONDS)) ./.gpu/gpu-tests --test-threads 1 2>&1 \
    | tee "$OUT/gpu-tests.log" | grep -E "^test |test result|panicked|failed|SKIP"
fi
if [ "$what" = helperab ]; then
  lead=(--strategy exhaustive --param WINDOWS=1 --param REPACK=0 --param LOAD=async --param VEC=4 --param TM=8
    --param PAD=0 --param STAGES=3 --param BOUNDS=specialized --param BK=16 --param BN=64)
  for round in 1 2; do
    for b in tune-helper tune; do
      for shape in 2047x2049x2051 999x1001x1003; do
        t=(--param BM=64 --param TN=4,8 --param WARP_N=8); [ $shape = 999x1001x1003 ] && t=(--param BM=32 --param TN=4 --param WARP_N=8,16)
        echo "== $b $shape round $round" | tee -a "$log"
        ./.gpu/$b --op sgemm --shape $shape "${lead[@]}" "${t[@]}" --out $OUT/$b-$round 2>>"$OUT/stderr.log" \
          | grep -E "cublas_sgemm  |^ +[1-4] |^Best" | tee -a "$log" | cut -c1-200
      done
    done
  done
fi
tar czf "$OUT/session11-$what.tar.gz" -C "$OUT" --exclude '*.tar.gz' . 2>/dev/null
# The tool's own verdicts (after the confirmation's re-timing), then exit codes and times.
grep -E "^(== tune|Best:|Time:|Search:)" "$log" | cut -c1-260
grep -E "exit [0-9]" "$log" | sort | uniq -c
