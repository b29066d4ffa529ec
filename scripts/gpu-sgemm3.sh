#!/usr/bin/env bash
# Issue 10, session 3, on the GPU machine (binaries from scripts/gpu-build.sh in .gpu/):
# deeper cp.async rings (STAGES 4, 5: BK=8 or 16 slices fit 48 KB) and register caps
# (OCCUPANCY) at 4096^3, then the odd shapes with those choices open to the search.
# Logs and CSVs go to $OUT (default ./gpu-out); one folder per run (runs of one shape
# write the same file names).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-/tmp/ca-cache}
log="$OUT/sgemm3.log"
. "$(dirname "$0")/gpu-run.sh"
if [ "${1:-}" != "tm16" ]; then
# 128x128 blocks of 256 threads, 8x8 per thread (the classic SIMT GEMM tile), BK 8 or 16,
# 2 to 5 stages, with and without a 128-register cap (OCCUPANCY=16: two blocks per SM).
RESULTS="$OUT/big128" run --op sgemm --shape 4096x4096x4096 --strategy exhaustive --param BM=128 --param BN=128 \
  --param BK=8,16 --param TM=8 --param TN=8 --param WARP_N=4,8,16 --param VEC=4 --param PAD=0,4 \
  --param STAGES=2,3,4,5 --param LOAD=async --param OCCUPANCY=0,16 --param BOUNDS=specialized
# Session 2's winners (32 or 64 x 128, 8x8) with more stages and register caps.
RESULTS="$OUT/narrow" run --op sgemm --shape 4096x4096x4096 --strategy exhaustive --param BM=32,64 --param BN=128 \
  --param BK=16,32 --param TM=8 --param TN=8 --param WARP_N=8,16 --param VEC=4 --param PAD=0 \
  --param STAGES=2,3,4 --param LOAD=async --param OCCUPANCY=0,8,16 --param BOUNDS=specialized
fi
# Odd shapes: the default space with STAGES up to 5 and OCCUPANCY 0/16, annealed.
if [ "${1:-}" != "tm16" ]; then
for shape in 3000x2000x1500 1023x1025x1027; do
  RESULTS="$OUT/odd-$shape" run --op sgemm --shape "$shape" --strategy anneal --budget 384 \
    --param STAGES=1,2,3,4,5 --param OCCUPANCY=0,16
done
fi
# 16-row thread tiles (TM=16: 128 accumulators a thread), as in the cuBLAS kernel ncu showed
# at 4096^3 (sm80_xmma_gemm_..._tilesize256x128x8_stage3_warpsize4x2x1_ffma: 256 threads,
# 254 registers, one block per SM). `bash scripts/gpu-sgemm3.sh tm16` runs only these.
tm16=(--param BK=8,16 --param TM=8,16 --param WARP_N=4,8,16 --param PAD=0,4 --param STAGES=2,3
      --param LOAD=regs,async --param BOUNDS=specialized)
for shape in 4096x4096x4096 3000x2000x1500; do
  RESULTS="$OUT/tm16-$shape" run --op sgemm --shape "$shape" --strategy exhaustive --param BM=128,256 \
    --param BN=64,128 --param TN=8 --param VEC=4 "${tm16[@]}"
done
RESULTS="$OUT/tm16-1023x1025x1027" run --op sgemm --shape 1023x1025x1027 --strategy exhaustive --param BM=64,128,256 \
  --param BN=32,64 --param BK=16 --param TM=8,16 --param TN=4,8 --param WARP_N=4,8 --param VEC=1 \
  --param PAD=4 --param STAGES=2,3,4 --param LOAD=async --param BOUNDS=specialized
rm -f "$OUT"/*/*.journal.jsonl "$OUT"/*/*.lock
grep -E "^== |^Best|cublas_sgemm |Search:|Time:" "$log"
