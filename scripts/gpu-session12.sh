#!/usr/bin/env bash
# Session 12 on the GPU machine (run from the repo root with .gpu/ carried).
#   chunk: issue 9's READ=chunk (RUNS=sector tiles read rows of in as aligned 16-byte chunks):
#          every sector variant with READ=chunk verified through the CLI at small odd shapes in
#          every dtype, then READ=elem,chunk over every sector variant at 8191x8191, exhaustive,
#          same run, f16 first, then f32 and f64.
#   write: WRITE=chunk (the tile kept transposed, runs of out written as aligned 16-byte chunks)
#          verified the same way at the small odd shapes, then READ=elem,chunk x WRITE=elem,chunk
#          at 8191x8191 in every dtype, exhaustive, same run. WRITE=chunk measured slower and was
#          removed before it was committed (README, session 12), so this mode no longer runs.
#   final: the READ=chunk GPU test, then READ=elem,chunk over every sector variant at 8191x8191
#          in f16 and f32, exhaustive, two rounds (the committed template; the write mode
#          above was removed after it measured slower).
#   ncu10: issue 10's gap at 999x1001x1003, taken apart: the stored winner's tile (windowed
#          32x64x16, TN=4, STAGES=3) timed, then profiled with Nsight Compute (full set), at
#          999x1001x1003 (K and N odd: A windows, B element by element), 1000x1001x1000 (N odd:
#          B windows), 1000x1000x1003 (K odd: A windows, B float4s) and 1000^3 (aligned,
#          WINDOWS=0).
#   bscalar: B element by element wherever WINDOWS=1 (.gpu/tune-bs: B_SCALAR defined as
#            WIN_N4 != 0 || WIN_K4 != 0) against the build as committed (B windows where only N
#            is odd, float4s where only K is), same tiles, alternating, two rounds, at
#            1000x1001x1000, 1000x1000x1003 and (the same kernel in both, a noise check)
#            999x1001x1003.
#   belems: the B_ELEMS GPU test, then the default sgemm search (B_ELEMS=0,1 in the space) at
#           1000x1001x1000 and 1000x1000x1003, warm-started from results/best.csv (one copy).
#   tests1: the GPU tests of sgemm, matmul and the warm start (one device call);
#   tests2: the others but the two every-variant transpose tests (whose sources this session
#           left byte-identical).
#   searchab: the default sgemm search at 1000x1001x1000 and 1000x1000x1003 with B_ELEMS=0
#             pinned and with the whole default space, same run, each warm-started from
#             session 11's results/best.csv (commit 52a7db6, copied to .gpu/best_s11.csv).
# Logs go to $OUT (default ./gpu-out), tarred into $OUT/session12-<mode>.tar.gz (the device
# tool returns at most 8 files).
# Usage: bash scripts/gpu-session12.sh [chunk|write|final|ncu10|bscalar|belems|tests1|tests2|searchab]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache}
what=${1:-chunk}
log="$OUT/session12-$what.log"
. "$(dirname "$0")/gpu-run.sh"
sector=(--param VEC=1 --param RUNS=sector --param BOUNDS=edge,always)
if [ "$what" = chunk ]; then
  for dtype in f16 f32 f64; do
    for shape in 7x5 1x9 9x1 33x4097 4097x33 999x1001 2001x3003; do
      RESULTS=$OUT/small run --op transpose --shape $shape --dtype $dtype --strategy exhaustive "${sector[@]}" \
        --param READ=chunk --reps 3 --confirm-rounds 0 --no-pruned-rows | grep -E "verified|failed|rror" | head -3
    done
  done
  for dtype in f16 f32 f64; do
    [ $SECONDS -lt 480 ] && RESULTS=$OUT/big-$dtype run --op transpose --shape 8191x8191 --dtype $dtype \
      --strategy exhaustive "${sector[@]}" --param READ=elem,chunk
  done
fi
if [ "$what" = write ]; then
  for dtype in f16 f32 f64; do
    for shape in 7x5 1x9 9x1 33x4097 4097x33 999x1001 2001x3003 1000x1000; do
      RESULTS=$OUT/small run --op transpose --shape $shape --dtype $dtype --strategy exhaustive "${sector[@]}" \
        --param READ=chunk --param WRITE=chunk --reps 3 --confirm-rounds 0 --no-pruned-rows | grep -E "verified|failed|rror" | head -3
    done
  done
  for dtype in f16 f32 f64; do
    [ $SECONDS -lt 450 ] && RESULTS=$OUT/big-$dtype run --op transpose --shape 8191x8191 --dtype $dtype \
      --strategy exhaustive "${sector[@]}" --param READ=elem,chunk --param WRITE=elem,chunk
  done
fi
if [ "$what" = final ]; then
  TUNE_EXE=$PWD/.gpu/tune timeout 300 ./.gpu/gpu-tests --test-threads 1 chunk_read 2>&1 \
    | tee "$OUT/gpu-tests-chunk.log" | grep -E "^test |test result|panicked|failed|SKIP"
  for round in 1 2; do
    for dtype in f16 f32; do
      [ $SECONDS -lt 500 ] && RESULTS=$OUT/big-$dtype-$round run --op transpose --shape 8191x8191 --dtype $dtype \
        --strategy exhaustive "${sector[@]}" --param READ=elem,chunk
    done
  done
fi
if [ "$what" = ncu10 ]; then
  mkdir -p "$OUT/ncu"
  tile=(--strategy exhaustive --param BM=32 --param BN=64 --param BK=16 --param TM=8 --param TN=4 --param WARP_N=8
    --param VEC=4 --param PAD=0 --param STAGES=3 --param LOAD=async --param BOUNDS=specialized --param REPACK=0)
  for shape in 999x1001x1003 1000x1001x1000 1000x1000x1003 1000x1000x1000; do
    w=1; [ $shape = 1000x1000x1000 ] && w=0
    RESULTS=$OUT/time run --op sgemm --shape $shape "${tile[@]}" --param WINDOWS=$w | grep -E "cublas_sgemm  |^Best"
  done
  for shape in 999x1001x1003 1000x1001x1000 1000x1000x1003 1000x1000x1000; do
    w=1; [ $shape = 1000x1000x1000 ] && w=0
    timeout 150 ncu --clock-control none -k regex:'^sgemm$' --launch-skip 1 -c 1 --set full \
      ./.gpu/tune --op sgemm --shape $shape --reps 3 --warmup 1 --out /tmp/ncu-results "${tile[@]}" \
      --param WINDOWS=$w >"$OUT/ncu/full-$shape.txt" 2>&1
    echo "ncu $shape: $(grep -E 'Duration|Executed Ipc Active|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Instructions  ' "$OUT/ncu/full-$shape.txt" | awk '{print $1,$2,$NF}' | tr '\n' ';')" | tee -a "$log"
  done
fi
if [ "$what" = bscalar ]; then
  tiles=(--strategy exhaustive --param BM=32,64 --param BN=64,128 --param BK=16 --param TM=8 --param TN=4,8
    --param WARP_N=8 --param VEC=4 --param PAD=0 --param STAGES=3 --param LOAD=async --param BOUNDS=specialized
    --param REPACK=0 --param WINDOWS=1)
  for round in 1 2; do
    for b in tune-bs tune; do
      for shape in 1000x1001x1000 1000x1000x1003 999x1001x1003; do
        echo "== $b $shape round $round" | tee -a "$log"
        ./.gpu/$b --op sgemm --shape $shape "${tiles[@]}" --out $OUT/$b-$round 2>>"$OUT/stderr.log" \
          | grep -E "cublas_sgemm  |^ +[1-4] |^Best|verified configurations" | tee -a "$log" | cut -c1-220
      done
    done
  done
fi
if [ "$what" = belems ]; then
  TUNE_EXE=$PWD/.gpu/tune timeout 300 ./.gpu/gpu-tests --test-threads 1 element_wise_b 2>&1 \
    | tee "$OUT/gpu-tests-belems.log" | grep -E "^test |test result|panicked|failed|SKIP"
  mkdir -p "$OUT/default" && cp results/best.csv "$OUT/default/best.csv"
  for shape in 1000x1001x1000 1000x1000x1003; do
    [ $SECONDS -lt 480 ] && RESULTS=$OUT/default run --op sgemm --shape $shape
  done
fi
if [ "$what" = tests1 ] || [ "$what" = tests2 ]; then
  if [ "$what" = tests1 ]; then
    sel=(sgemm matmul a_search_measures)
  else
    sel=(--skip sgemm --skip matmul --skip a_search_measures --skip every_variant)
  fi
  TUNE_EXE=$PWD/.gpu/tune timeout 580 ./.gpu/gpu-tests --test-threads 1 "${sel[@]}" 2>&1 \
    | tee "$OUT/gpu-tests-$what.log" | grep -E "^test |test result|panicked|failed|SKIP"
fi
if [ "$what" = searchab ]; then
  for shape in 1000x1001x1000 1000x1000x1003; do
    for way in "--param B_ELEMS=0" ""; do
      dir=$OUT/ab-$shape-${way:+b0}; mkdir -p "$dir" && cp .gpu/best_s11.csv "$dir/best.csv"
      # shellcheck disable=SC2086
      [ $SECONDS -lt 470 ] && RESULTS=$dir run --op sgemm --shape $shape $way
    done
  done
fi
tar czf "$OUT/session12-$what.tar.gz" -C "$OUT" --exclude '*.tar.gz' . 2>/dev/null
# The tool's own verdicts (after the confirmation's re-timing), then exit codes and times.
grep -E "^(== tune|Best:|Time:|Search:)" "$log" | cut -c1-260
grep -E "exit [0-9]" "$log" | sort | uniq -c
