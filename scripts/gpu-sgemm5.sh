#!/usr/bin/env bash
# Issue 10, session 5's template change (the partial K slice first, so only edge blocks check
# inside the main loop), on the GPU machine (binaries from scripts/gpu-build.sh in .gpu/).
# Written in a session without a GPU; run it first thing in the next one. Every shape here
# has a partial K slice. Logs and CSVs go to $OUT (default ./gpu-out), one folder per run.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache}
log="$OUT/sgemm5.log"
. "$(dirname "$0")/gpu-run.sh"
# Around the session-3 winners, exhaustive, both bounds modes of the default sweep.
RESULTS="$OUT/focused-1023" run --op sgemm --shape 1023x1025x1027 --strategy exhaustive \
  --param BM=64,128 --param BN=32,64 --param BK=16,32 --param TM=8 --param TN=4,8 --param WARP_N=8,16 \
  --param VEC=1 --param PAD=0,4 --param STAGES=2,3,4 --param LOAD=async --param BOUNDS=specialized,edge
RESULTS="$OUT/focused-3000" run --op sgemm --shape 3000x2000x1500 --strategy exhaustive \
  --param BM=32,64 --param BN=64,128 --param BK=16,32 --param TM=8 --param TN=8 --param WARP_N=8,16 \
  --param VEC=4 --param PAD=0 --param STAGES=2,3 --param LOAD=async --param BOUNDS=specialized,edge
# The whole default space (plus deeper rings), annealed as in session 3.
for shape in 1023x1025x1027 3000x2000x1500 1000x1000x1000; do
  RESULTS="$OUT/anneal-$shape" run --op sgemm --shape "$shape" --strategy anneal --budget 384 \
    --param STAGES=1,2,3,4,5
done
