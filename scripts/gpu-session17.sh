#!/usr/bin/env bash
# Session 17 (issue 10): COPY4, the 4-byte cp.async path (LOAD=async with VEC=1) rewritten
# after cuBLAS's kernel at 999x1001x1003 (64x128x8, 4-byte accesses, A fragments along M):
# copies that step from one base pointer, A transposed on the way, edge blocks moved inward.
#   copy4 / copy4b / ksplit / wide: its GPU test and exhaustive sweeps of it (results/session17)
#   final:  on the final build: its test, the table's odd shapes, the other GPU tests, faults
#   sgemm:  the sgemm GPU tests but the COPY4 one (~9 minutes)
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
if [ "$mode" = final ]; then
  # The final build: the COPY4 test, the table's odd shapes (the COPY4 family with KSPLIT and
  # both snake orders, exhaustive; best.csv keeps a stored row that is faster), the GPU tests
  # but the sgemm-named ones, the planted faults.
  TUNE_EXE=/tmp/b/tune /tmp/b/gpu-tests --test-threads=1 four_byte > $OUT/h100_gpu_tests_copy4.log 2>&1
  grep -E "^test |test result|panicked" $OUT/h100_gpu_tests_copy4.log
  mkdir -p $OUT/table; cp results/best.csv $OUT/table/best.csv
  for sh in 999x1001x1003 2047x2049x2051 1000x1000x1003 1000x1001x1000; do
    /tmp/b/tune --op sgemm --shape $sh --strategy exhaustive --keep-best --no-pruned-rows --out $OUT/table --param VEC=1 --param LOAD=async --param BM=32,64,128 --param BN=64,128 --param BK=16,32 --param TM=8 --param TN=8 --param WARP_N=8,16 --param PAD=4 --param STAGES=2,3 --param KSPLIT=1,2,4 --param ORDER=snake,snakek --param BOUNDS=specialized > $OUT/table_$sh.log 2>&1
    echo "== $sh: exit $?"; grep -E "^Best|^Confidence" $OUT/table_$sh.log | cut -c1-300
  done
  TUNE_EXE=/tmp/b/tune /tmp/b/gpu-tests --test-threads=1 --skip sgemm --skip every_variant > $OUT/h100_gpu_tests_tests.log 2>&1
  grep -E "test result|panicked|FAILED" $OUT/h100_gpu_tests_tests.log
  TUNE_EXE=/tmp/b/tune /tmp/b/faults-tests --test-threads=1 > $OUT/h100_faults_tests.log 2>&1
  grep -E "test result" $OUT/h100_faults_tests.log
  prune $OUT/table/*.csv
  (cd $OUT && tar czf session17-table.tar.gz table && rm -rf table)
  exit 0
fi
if [ "$mode" = confirm ]; then
  # The transpose-only every_variant GPU tests on the final build, then three separate runs of
  # the leading COPY4 tiles at 999x1001x1003 (how far one run's % of cuBLAS moves).
  TUNE_EXE=/tmp/b/tune /tmp/b/gpu-tests --test-threads=1 every_variant > $OUT/h100_gpu_tests_variants.log 2>&1
  grep -E "^test |test result|panicked" $OUT/h100_gpu_tests_variants.log
  for r in 1 2 3; do
    /tmp/b/tune --op sgemm --shape 999x1001x1003 --strategy exhaustive --no-pruned-rows --out $OUT/confirm$r --param VEC=1 --param LOAD=async --param BM=64 --param BN=64,128 --param BK=32 --param TM=8 --param TN=8 --param WARP_N=8,16 --param PAD=4 --param STAGES=2,3 --param KSPLIT=2,4 --param ORDER=snake --param BOUNDS=specialized > $OUT/confirm_999_$r.log 2>&1
    echo "== round $r: exit $?"; sed -n '/^Top/,/^Best/p' $OUT/confirm_999_$r.log | cut -c1-40,115-240 | head -8
  done
  rm -rf $OUT/confirm?
  exit 0
fi
if [ "$mode" = sgemm ]; then
  # The sgemm-named GPU tests but the COPY4 one (run by `final`): ~9 minutes.
  TUNE_EXE=/tmp/b/tune /tmp/b/gpu-tests --test-threads=1 --nocapture sgemm --skip four_byte > $OUT/h100_gpu_tests_sgemm.log 2>&1
  grep -E "^test |test result|panicked" $OUT/h100_gpu_tests_sgemm.log
  exit 0
fi
echo "unknown mode $mode"; exit 2
