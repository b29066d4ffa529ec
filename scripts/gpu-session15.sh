#!/usr/bin/env bash
# Session 15: sgemm tiles past 48 KB of shared memory (dynamic shared memory, new this session).
#   tests: the sgemm GPU tests, the new sgemm_variants_past_48_kb_of_shared_memory_verify among them
#   tune:  same-run sweeps that hold both the stored static winner and tiles past 48 KB at
#          4096^3 and 2048^3 (cp.async, TM=TN=8) and at 999x1001x1003 (windowed, TN=4, STAGES up
#          to 4), each warm-started from results/best.csv with --keep-best, then the default
#          search at 4096^3 (anneal, 256 variants) on the new space.
# Run on the GPU machine with .gpu/ built by scripts/gpu-build.sh from this tree; logs and a tarball
# of the run folders in $OUT (committed under results/session15/).
set -u
export CUDA_AUTOTUNE_CACHE=/tmp/ca-cache
mode=${1:-tune}
# ab32A / ab32B: the default search (anneal 256, warm start from results/best.csv) at every
# shape of the tables, with the built-in templates (base_*) and with the copy whose
# cp.async destinations are 32-bit shared addresses (.gpu/tpl32b, s32_*), alternating per shape.
if [ "$mode" = ab32A ] || [ "$mode" = ab32B ]; then
  if [ "$mode" = ab32A ]; then shapes="4096x4096x4096 2048x2048x2048 1024x1024x1024 1000x1000x1000"
  else shapes="999x1001x1003 1023x1025x1027 2047x2049x2051 3000x2000x1500"; fi
  for s in $shapes; do
    for v in base s32; do
      t=""; [ $v = s32 ] && t="--templates .gpu/tpl32b"
      d=$OUT/${v}_$s; mkdir -p $d; cp results/best.csv $d/best.csv
      .gpu/tune --op sgemm --shape $s $t --out $d > $d.log 2>&1
      echo "$v $s: $(grep -E '^Best' $d.log | sed -E 's/.*GFLOP\/s, ([0-9.]+% of cublas_sgemm) \(([0-9.]+ ms) median.*/\1 \2/')"
    done
  done
  (cd $OUT && tar czf session15-$mode.tar.gz */ *.log && rm -rf */ *.log)
  exit 0
fi
# sweep32: sweep4096 and sweep999 below with the 32-bit copy-address template copy (.gpu/tpl32b).
if [ "$mode" = sweep32 ]; then
  T="--templates .gpu/tpl32b --strategy exhaustive --param LOAD=async --param BOUNDS=specialized --param REPACK=0"
  for s in 4096x4096x4096:sweep4096 999x1001x1003:sweep999; do
    d=$OUT/s32_${s#*:}; mkdir -p $d; cp results/best.csv $d/best.csv
    if [ ${s%%:*} = 4096x4096x4096 ]; then
      .gpu/tune --op sgemm --shape ${s%%:*} $T --param TM=8 --param TN=8 --param WINDOWS=0 --param BM=64,128 --param BN=64,128 --param BK=16,32 --param WARP_N=8,16 --param PAD=0,4 --param STAGES=2,3 --out $d > $d.log 2>&1
    else
      .gpu/tune --op sgemm --shape ${s%%:*} $T --param BM=32,64 --param BN=64,128 --param BK=16,32 --param TM=8 --param TN=4 --param WARP_N=8,16 --param PAD=0 --param STAGES=2,3,4 --param WINDOWS=1 --out $d > $d.log 2>&1
    fi
    echo "== $d: $(grep -E '^Best' $d.log)"
  done
  (cd $OUT && tar czf session15-sweep32.tar.gz */ *.log && rm -rf */)
  exit 0
fi
if [ "$mode" = tests ]; then
  TUNE_EXE=.gpu/tune .gpu/gpu-tests --test-threads=1 sgemm > $OUT/h100_gpu_tests_sgemm.log 2>&1
  grep -E "^test |test result" $OUT/h100_gpu_tests_sgemm.log
  exit 0
fi
run() { local name=$1; shift
  mkdir -p $OUT/$name; cp results/best.csv $OUT/$name/best.csv
  .gpu/tune --op sgemm --keep-best --out $OUT/$name "$@" > $OUT/$name.log 2>&1
  # Tarred after every run, so that a run cut off by the call's time limit loses only itself.
  (cd $OUT && tar czf session15-tune.tar.gz */)
  echo "== $name: $(grep -E '^Best' $OUT/$name.log | head -1)"; }
P="--strategy exhaustive --param TM=8 --param TN=8 --param LOAD=async --param BOUNDS=specialized --param REPACK=0 --param WINDOWS=0"
run sweep4096 --shape 4096x4096x4096 $P --param BM=64,128 --param BN=64,128 --param BK=16,32 --param WARP_N=8,16 --param PAD=0,4 --param STAGES=2,3
run sweep2048 --shape 2048x2048x2048 $P --param BM=64,128 --param BN=64,128 --param BK=16,32 --param WARP_N=8,16 --param PAD=0,4 --param STAGES=2,3
run sweep999 --shape 999x1001x1003 --strategy exhaustive --param BM=32,64 --param BN=64,128 --param BK=16,32 --param TM=8 --param TN=4 --param WARP_N=8,16 --param PAD=0 --param STAGES=2,3,4 --param LOAD=async --param BOUNDS=specialized --param REPACK=0 --param WINDOWS=1
run default4096 --shape 4096x4096x4096
for n in sweep4096 sweep2048 sweep999 default4096; do echo "== $n"; sed -n '/^Best/,$p' $OUT/$n.log | head -4; done
