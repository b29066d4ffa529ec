#!/usr/bin/env bash
# Session 16 (issue 9): RUNS=chunk, the transpose whose every global access is an aligned
# 16-byte vector at any stride (prototype: scripts/proto/chunk_transpose.cu).
#   tune:  the whole default space (RUNS=chunk included), exhaustive, at 8191^2 in f16, f32 and
#          f64 and at 1000^2 in f16 (the shapes where RUNS=chunk exists among the issue's)
#   table: the table (scripts/gpu-dtype.sh table) with the final template
#   variants / tests: the GPU tests but the sgemm ones, in two calls (every default variant,
#          RUNS=chunk included, verified at the small odd shapes in every dtype)
#   faults: the planted-faults suite and examples/tuned_transpose
#   chunk: every RUNS=chunk variant at 8191^2 per dtype, and the default space in f16
# Run on the GPU machine with the binaries of scripts/gpu-build.sh packed as
# .gpu/pack/bins.tar.xz (carry .gpu/pack); logs and a tarball of the run folders in $OUT.
set -u
export CUDA_AUTOTUNE_CACHE=/tmp/ca-cache
mode=${1:-tune}
mkdir -p /tmp/b && tar xJf .gpu/pack/bins.tar.xz -C /tmp/b
if [ "$mode" = tests ] || [ "$mode" = variants ] || [ "$mode" = sgemm ]; then
  # tests: every GPU test but the sgemm ones and every_variant (run apart: ~7 minutes);
  # sgemm: the sgemm ones (~9 minutes).
  case $mode in tests) sel="--skip sgemm --skip every_variant";; variants) sel="every_variant";; *) sel="sgemm";; esac
  TUNE_EXE=/tmp/b/tune /tmp/b/gpu-tests --test-threads=1 --nocapture $sel > $OUT/h100_gpu_tests_$mode.log 2>&1
  grep -E "^test |test result|verified, best|panicked" $OUT/h100_gpu_tests_$mode.log
  exit 0
fi
if [ "$mode" = chunktest ]; then
  # The RUNS=chunk GPU test alone (after it gained the shapes whose rows of out are whole
  # sectors), then issue 10: the 999x1001x1003 winner's family with occupancy caps.
  TUNE_EXE=/tmp/b/tune /tmp/b/gpu-tests --test-threads=1 chunk_runs > $OUT/h100_gpu_tests_chunktest.log 2>&1
  grep -E "^test |test result|panicked" $OUT/h100_gpu_tests_chunktest.log
  n=occ999; mkdir -p $OUT/$n; cp results/best.csv $OUT/$n/best.csv
  /tmp/b/tune --op sgemm --shape 999x1001x1003 --strategy exhaustive --keep-best --no-pruned-rows --param BM=32,64 --param BN=64 --param BK=16,32 --param TM=8 --param TN=4 --param WARP_N=8,16 --param PAD=0 --param STAGES=2,3 --param LOAD=async --param BOUNDS=specialized --param REPACK=0 --param WINDOWS=1 --param OCCUPANCY=0,8,12,16,24 --out $OUT/$n > $OUT/$n.log 2>&1
  sed -n '/^Top/,/^Clocks/p' $OUT/$n.log | head -20
  (cd $OUT && tar czf session16-occ999.tar.gz $n && rm -rf $n)
  exit 0
fi
if [ "$mode" = vec1 ]; then
  # Issue 10: cuBLAS runs one kernel at 999x1001x1003 and 1000^3 alike, a 64x128x8 tile with
  # 4-byte loads (aligna4), 3 stages, 128 threads (scripts/proto/gpu-cublas-probe.sh). The same
  # idea in this space: VEC=1 (4-byte cp.async, no windows needed at odd strides), exhaustive.
  n=vec1_999; mkdir -p $OUT/$n; cp results/best.csv $OUT/$n/best.csv
  /tmp/b/tune --op sgemm --shape 999x1001x1003 --strategy exhaustive --keep-best --no-pruned-rows --param VEC=1 --param LOAD=async --param WINDOWS=0 --param REPACK=0 --param BM=32,64,128 --param BN=64,128 --param BK=8,16,32 --param TM=8 --param TN=4,8 --param WARP_N=4,8,16 --param PAD=0 --param STAGES=2,3 --param BOUNDS=specialized --out $OUT/$n > $OUT/$n.log 2>&1
  sed -n '/^Top/,/^Confidence/p' $OUT/$n.log | cut -c1-250
  (cd $OUT && tar czf session16-vec1.tar.gz $n && rm -rf $n)
  exit 0
fi
if [ "$mode" = faults ]; then
  # The planted-faults suite and the exported-kernel example, on results/best.csv as committed.
  TUNE_EXE=/tmp/b/tune /tmp/b/faults-tests --test-threads=1 > $OUT/h100_faults_tests.log 2>&1
  /tmp/b/tuned_transpose 1000x1000 results/best.csv > $OUT/h100_tuned_transpose.log 2>&1
  echo "tuned_transpose exit $?" >> $OUT/h100_tuned_transpose.log
  grep -E "^test |test result" $OUT/h100_faults_tests.log; tail -n 12 $OUT/h100_tuned_transpose.log
  exit 0
fi
if [ "$mode" = table ]; then
  # The table with the final template: scripts/gpu-dtype.sh table (default space,
  # auto = exhaustive here, L2 flushed), every dtype and shape; CSVs and best.csv in a tarball.
  mkdir -p .gpu && cp /tmp/b/tune .gpu/tune
  OUT=$OUT bash scripts/gpu-dtype.sh table > /dev/null 2>&1
  for f in $OUT/results/*.csv; do if [ "$(basename $f)" != best.csv ]; then grep -v ",pruned," $f > $f.tmp; mv $f.tmp $f; fi; done
  (cd $OUT && tar czf session16-table.tar.gz results && rm -rf results)
  grep -E "^== tune|^Best|^exit" $OUT/dtype.log | sed -E 's/^Best: .*  ([0-9.]+ GB\/s, [0-9.]+% of [a-z_0-9]+).*/  \1/'
  exit 0
fi
if [ "$mode" = chunk ]; then
  # RUNS=chunk alone (every tile, OCCUPANCY 0 and 64), after its registers were cut.
  for d in f16 f32 f64; do
    n=chunk_$d; mkdir -p $OUT/$n; cp results/best.csv $OUT/$n/best.csv
    /tmp/b/tune --op transpose --shape 8191x8191 --dtype $d --strategy exhaustive --param RUNS=chunk --param OCCUPANCY=0,64 --out $OUT/$n > $OUT/$n.log 2>&1
    echo "== $n: $(grep -E '^Best' $OUT/$n.log | head -1)"
  done
  n=default_f16; mkdir -p $OUT/$n; cp results/best.csv $OUT/$n/best.csv
  /tmp/b/tune --op transpose --shape 8191x8191 --dtype f16 --strategy exhaustive --out $OUT/$n > $OUT/$n.log 2>&1
  echo "== $n: $(grep -E '^Best' $OUT/$n.log | head -1)"
  for f in $OUT/*/*.csv; do if [ "$(basename $f)" != best.csv ]; then grep -v ",pruned," $f > $f.tmp; mv $f.tmp $f; fi; done
  (cd $OUT && tar czf session16-chunk.tar.gz */ && rm -rf */)
  exit 0
fi
run() { local name=$1; shift
  mkdir -p $OUT/$name; cp results/best.csv $OUT/$name/best.csv
  /tmp/b/tune --op transpose --strategy exhaustive --out $OUT/$name "$@" > $OUT/$name.log 2>&1
  echo "== $name: $(grep -E '^Best' $OUT/$name.log | head -1)"; }
run f16_8191 --shape 8191x8191 --dtype f16
run f32_8191 --shape 8191x8191 --dtype f32
run f64_8191 --shape 8191x8191 --dtype f64
run f16_1000 --shape 1000x1000 --dtype f16
# Only configurations that ran come back (pruned rows are listed by the spec, not measured).
for f in $OUT/*/*.csv; do if [ "$(basename $f)" != best.csv ]; then grep -v ",pruned," $f > $f.tmp; mv $f.tmp $f; fi; done
(cd $OUT && tar czf session16-tune.tar.gz */ && rm -rf */)
for n in f16_8191 f32_8191 f64_8191 f16_1000; do echo "== $n"; sed -n '/^Best/,$p' $OUT/$n.log | head -3; done
