#!/usr/bin/env bash
# Issue 9 on the GPU machine (no Rust there), from binaries built here by scripts/gpu-build.sh
# into .gpu/. Logs and CSVs go to $OUT (default ./gpu-out).
# Usage: bash scripts/gpu-dtype.sh [tests|variants|table|quick|odd|sector|l2|levers|occ]
#   tests:  the GPU tests except the two every-variant ones (faults, hangs, ctrl-c, resume,
#           matmul, sgemm searches, confidence, ...); on a fresh machine the whole binary
#           compiles every variant from scratch and passes one device call's 10 minutes
#           (session 6: stopped at 540 s after 5 of 13 tests), so it is split
#   variants: the two every-variant tests (every transpose variant verifies at multiple and
#           odd shapes in f32, f64 and f16)
#   table:  the issue's table: every dtype at 1000x1000, 1024x1024, 4096x4096, 8192x8192 and
#           the non-multiples 8191x8191 (odd strides: no vectors) and 6000x6000 (even strides,
#           partial 64-tiles); exhaustive (the default space is under 1024 valid points)
#   quick:  8192x8192 and 8191x8191 in every dtype
#   odd:    small odd shapes (every variant verified), then the odd stride 8191x8191 in
#           every dtype
#   sector: 8191x8191 f32 and f16, RUNS=sector with PAD, CACHE and TILES_PER_BLOCK opened
#   l2:     8191x8191 f32 and f16, VEC=1, with and without L2 prefetch-size hints
#   (session 4 parts `carry` and `outvec`, for two reverted template experiments, are in
#   commit d794a8c)
#   levers: 8191x8191 f32 with the levers one at a time (ASPECT, TILES_PER_BLOCK, CACHE, PAD)
#   (session 5's parts `async` and `next`, READ=async against READ=elem, ran in session 6 through
#   scripts/gpu-session6.sh and showed no gain; the code is in commit 3ae16dc, the READ=pair
#   experiment's in e39c2db)
#   occ:    8191x8191 in every dtype, VEC=1, both RUNS, with OCCUPANCY caps and 1/2 tiles
#           per block, exhaustive (session 4: the lean sector path)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
part=${1:-table}
mkdir -p "$OUT/results"
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache} TUNE_EXE=$PWD/.gpu/tune
log="$OUT/dtype.log"
. "$(dirname "$0")/gpu-run.sh"
case "$part" in
  tests)
    ./.gpu/gpu-tests --nocapture --test-threads=1 --skip every_variant 2>&1 | tee "$OUT/gpu-tests.log" \
      | grep -E "^test |test result|verified, best|panicked" | tee -a "$log"
    ;;
  variants)
    ./.gpu/gpu-tests --nocapture --test-threads=1 every_variant 2>&1 | tee "$OUT/gpu-tests-variants.log" \
      | grep -E "^test |test result|verified, best|panicked" | tee -a "$log"
    ;;
  table)
    for dtype in f32 f64 f16; do
      for shape in 1000x1000 1024x1024 4096x4096 8192x8192 8191x8191 6000x6000; do
        run --op transpose --shape "$shape" --dtype "$dtype"
      done
    done
    ;;
  quick)
    for dtype in f32 f64 f16; do
      for shape in 8192x8192 8191x8191; do
        run --op transpose --shape "$shape" --dtype "$dtype"
      done
    done
    ;;
  odd)
    # Small odd shapes first (every variant verified: the peeled and sector-aligned paths at
    # ragged edges), each in its own folder.
    for dtype in f32 f64 f16; do
      for shape in 7x5 1x9 9x1 33x4097 4097x33 999x1001; do
        RESULTS=/tmp/odd-small run --op transpose --shape "$shape" --dtype "$dtype" --reps 5 | grep -E "^Best|verified configurations"
      done
    done
    for dtype in f32 f64 f16; do
      run --op transpose --shape 8191x8191 --dtype "$dtype"
    done
    # The one other table row whose space has RUNS=sector (2000-byte rows of out).
    run --op transpose --shape 1000x1000 --dtype f16
    ;;
  occ)
    for dtype in f32 f16 f64; do
      RESULTS=$OUT/occ-$dtype run --op transpose --shape 8191x8191 --dtype "$dtype" --strategy exhaustive \
        --param VEC=1 --param RUNS=tile,sector --param OCCUPANCY=0,32,64 --param TILES_PER_BLOCK=1,2 \
        --param BOUNDS=edge,always
    done
    ;;
  sector)
    # 8191x8191 with sector-aligned runs and the levers the default sweep leaves out
    # (PAD=0, streaming cache hints, 4 tiles per block), exhaustive.
    for dtype in f32 f16; do
      RESULTS=$OUT/sector-$dtype run --op transpose --shape 8191x8191 --dtype "$dtype" --strategy exhaustive \
        --param VEC=1 --param RUNS=sector --param PAD=0,1 --param CACHE=default,streaming \
        --param TILES_PER_BLOCK=1,2,4
    done
    ;;
  l2)
    # 8191x8191 with the L2 prefetch-size hints on the loads (CACHE=l2_128, l2_256), VEC=1.
    for dtype in f32 f16; do
      RESULTS=$OUT/l2-$dtype run --op transpose --shape 8191x8191 --dtype "$dtype" --strategy exhaustive \
        --param VEC=1 --param CACHE=default,l2_128,l2_256
    done
    ;;
  levers)
    base=(--op transpose --shape 8191x8191 --param TILE_DIM=32,64 --param BLOCK_ROWS=4,8,16,32)
    # Each in its own folder: runs of one op, shape and dtype write the same file names.
    RESULTS=$OUT/levers-aspect run "${base[@]}" --param ASPECT=square,wide,tall --param TILES_PER_BLOCK=1
    RESULTS=$OUT/levers-tiles run "${base[@]}" --param ASPECT=square --param TILES_PER_BLOCK=1,2,4
    RESULTS=$OUT/levers-cache run "${base[@]}" --param ASPECT=square,wide,tall --param CACHE=default,streaming
    RESULTS=$OUT/levers-swizzle run --op transpose --shape 8192x8192 --dtype f16 --param PAD=0,1 --param VEC=2,4
    ;;
esac
