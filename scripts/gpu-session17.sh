#!/usr/bin/env bash
# Session 17 (issue 10): COPY4, the 4-byte cp.async path (LOAD=async with VEC=1) rewritten
# after cuBLAS's kernel at 999x1001x1003 (64x128x8, 4-byte accesses, A fragments along M):
# copies that step from one base pointer, A transposed on the way, edge blocks moved inward.
#   copy4:  its GPU test, then every COPY4 tile at 999x1001x1003, exhaustive
#   sgemm:  the sgemm GPU tests (~9 minutes)
#   table:  the shapes with the default space (auto: anneal, budget as given)
# Run on the GPU machine with the binaries of scripts/gpu-build.sh packed as
# .gpu/pack/bins.tar.xz (carry .gpu/pack); logs and a tarball of the run folders in $OUT.
set -u
export CUDA_AUTOTUNE_CACHE=/tmp/ca-cache
mode=${1:-copy4}
mkdir -p /tmp/b && tar xJf .gpu/pack/bins.tar.xz -C /tmp/b
# Drops the pruned rows (listed by the spec, never measured) from a run folder's CSVs.
prune() { for f in "$@"; do [ "$(basename $f)" != best.csv ] && grep -v ",pruned," $f > $f.tmp && mv $f.tmp $f; done; }
# run NAME ARGS...: one tune into $OUT/NAME (seeded with the committed best.csv), its Top table.
run() { local n=$1; shift
  mkdir -p $OUT/$n; cp results/best.csv $OUT/$n/best.csv
  /tmp/b/tune --op sgemm --keep-best --no-pruned-rows --out $OUT/$n "$@" > $OUT/$n.log 2>&1
  echo "== $n: exit $?"; sed -n '/^Top/,/^Confidence/p' $OUT/$n.log | cut -c1-230 | head -14; }
if [ "$mode" = copy4 ]; then
  TUNE_EXE=/tmp/b/tune /tmp/b/gpu-tests --test-threads=1 four_byte > $OUT/h100_gpu_tests_copy4.log 2>&1
  grep -E "^test |test result|panicked" $OUT/h100_gpu_tests_copy4.log
  run copy4_999 --shape 999x1001x1003 --strategy exhaustive --param VEC=1 --param LOAD=async --param BM=32,64,128 --param BN=64,128 --param BK=8,16,32 --param TM=8 --param TN=4,8 --param WARP_N=4,8,16 --param PAD=0,4 --param STAGES=2,3 --param BOUNDS=specialized
  prune $OUT/*/*.csv
  (cd $OUT && tar czf session17-copy4.tar.gz */ && rm -rf */)
  exit 0
fi
if [ "$mode" = copy4b ]; then
  # After A's copies went 8 k x 4 rows a warp (conflict-free transposed stores at any BK):
  # the test again, then the sweep with PAD=4 only and KSPLIT and a fourth stage added.
  TUNE_EXE=/tmp/b/tune /tmp/b/gpu-tests --test-threads=1 four_byte > $OUT/h100_gpu_tests_copy4b.log 2>&1
  grep -E "^test |test result|panicked" $OUT/h100_gpu_tests_copy4b.log
  run copy4b_999 --shape 999x1001x1003 --strategy exhaustive --param VEC=1 --param LOAD=async --param BM=32,64,128 --param BN=64,128 --param BK=8,16,32 --param TM=8 --param TN=4,8 --param WARP_N=4,8,16 --param PAD=4 --param STAGES=2,3,4 --param KSPLIT=1,2 --param BOUNDS=specialized
  prune $OUT/*/*.csv
  (cd $OUT && tar czf session17-copy4b.tar.gz */ && rm -rf */)
  exit 0
fi
if [ "$mode" = ksplit ]; then
  # COPY4 with more warps a block (KSPLIT 1, 2, 4) at the odd shapes and 1000^3.
  for sh in 999x1001x1003 1023x1025x1027 2047x2049x2051 1000x1000x1000; do
    run ks_$sh --shape $sh --strategy exhaustive --param VEC=1 --param LOAD=async --param BM=32,64,128 --param BN=64,128 --param BK=16,32 --param TM=8 --param TN=8 --param WARP_N=8,16 --param PAD=4 --param STAGES=2,3,4 --param KSPLIT=1,2,4 --param BOUNDS=specialized
  done
  prune $OUT/*/*.csv
  (cd $OUT && tar czf session17-ksplit.tar.gz */ && rm -rf */)
  exit 0
fi
if [ "$mode" = wide ]; then
  # COPY4 at 999x1001x1003: deeper slices (BK=64), KSPLIT up to 8, thinner thread tiles,
  # then the FFMA orders on the leading tiles.
  run wide_999 --shape 999x1001x1003 --strategy exhaustive --param VEC=1 --param LOAD=async --param BM=64,128 --param BN=64,128 --param BK=16,32,64 --param TM=8 --param TN=4,8 --param WARP_N=8,16 --param PAD=4 --param STAGES=2,3 --param KSPLIT=2,4,8 --param BOUNDS=specialized
  run order_999 --shape 999x1001x1003 --strategy exhaustive --param VEC=1 --param LOAD=async --param BM=64 --param BN=64,128 --param BK=16,32 --param TM=8 --param TN=8 --param WARP_N=8,16 --param PAD=4 --param STAGES=2,3 --param KSPLIT=2,4 --param ORDER=row,snake,snakek --param BOUNDS=specialized
  prune $OUT/*/*.csv
  (cd $OUT && tar czf session17-wide.tar.gz */ && rm -rf */)
  exit 0
fi
if [ "$mode" = sgemm ]; then
  TUNE_EXE=/tmp/b/tune /tmp/b/gpu-tests --test-threads=1 --nocapture sgemm > $OUT/h100_gpu_tests_sgemm.log 2>&1
  grep -E "^test |test result|panicked" $OUT/h100_gpu_tests_sgemm.log
  exit 0
fi
echo "unknown mode $mode"; exit 2
