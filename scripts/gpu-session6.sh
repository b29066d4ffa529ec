#!/usr/bin/env bash
# Session 6 on the GPU machine (binaries from scripts/gpu-build.sh in .gpu/), run at 3ae16dc
# (READ=async was removed after it: the transpose part needs that commit): the work session 5
# built without a GPU, in two calls that each fit the device's 10 minutes on a cold machine
# (no NVRTC cache: every variant compiles once per call).
#   transpose: READ=async against READ=elem (small odd shapes, every variant verified, every
#              dtype; 8191x8191 sector-only in every dtype), then 8191x8191 f16 over the
#              whole default space plus READ=async, exhaustive (the table's open row)
#   sgemm:     session 5's partial-K-slice-first template: focused exhaustive sweeps at the
#              two odd shapes, then the default space annealed (384) at both
# Logs and CSVs go to $OUT (default ./gpu-out), one folder per run.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
part=${1:?usage: gpu-session6.sh transpose|sgemm}
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache} TUNE_EXE=$PWD/.gpu/tune
log="$OUT/$part.log"
. "$(dirname "$0")/gpu-run.sh"
case "$part" in
  transpose)
    for dtype in f16 f32 f64; do
      for shape in 7x5 33x4097 4097x33 999x1001 2001x3003; do
        RESULTS=/tmp/async-small run --op transpose --shape "$shape" --dtype "$dtype" --reps 5 \
          --param VEC=1 --param RUNS=sector --param READ=elem,async | grep -E "^Best|verified configurations|failed"
      done
    done
    for dtype in f16 f32 f64; do
      RESULTS=$OUT/async-$dtype run --op transpose --shape 8191x8191 --dtype "$dtype" --strategy exhaustive \
        --param VEC=1 --param RUNS=sector --param READ=elem,async --param BOUNDS=edge,always
    done
    RESULTS=$OUT/full-f16 run --op transpose --shape 8191x8191 --dtype f16 --strategy exhaustive \
      --param READ=elem,async --no-pruned-rows
    ;;
  sgemm)
    OUT=$OUT bash "$(dirname "$0")/gpu-sgemm5.sh"
    ;;
esac
