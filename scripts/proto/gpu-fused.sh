#!/usr/bin/env bash
# Session 14 (issue 10): the fused-repack prototype (sgemm_fused.cu).
#   bash scripts/proto/gpu-fused.sh render   on the build machine: writes the tuner's REPACK=1
#                                             sources of 8 tiles at 999x1001x1003 and
#                                             1023x1025x1027 into .gpu/fused/ (git-ignored)
#   bash scripts/proto/gpu-fused.sh          on the GPU machine (carry .gpu/fused): builds
#                                             sgemm_fused.cu once per source and runs each at its
#                                             shape, two rounds; log in $OUT/fused.log
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = render ]; then
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-$(scripts/nvrtc-env.sh)}
  rm -rf .gpu/fused && mkdir -p .gpu/fused
  common="--param TM=8 --param PAD=0 --param BOUNDS=specialized --param REPACK=1 --param WINDOWS=0
    --param LOAD=async --param KSPLIT=1 --param B_ELEMS=0 --param GROUP_M=8 --param OCCUPANCY=0
    --param ORDER=snakek --param CSTORE=scalar"
  for shape in 999x1001x1003 1023x1025x1027; do
    for t in 64x64x32x4x16x2 32x64x32x4x16x3 32x64x16x4x8x3 64x64x32x4x16x3 32x128x16x4x8x3 \
             64x32x16x4x8x2 128x32x16x4x8x3 64x64x16x8x8x3; do
      IFS=x read -r bm bn bk tn wn st <<< "$t"
      rm -rf /tmp/fused-emit
      cargo run --release --quiet -- --op sgemm --shape "$shape" --compile-only --arch sm_90 \
        --strategy exhaustive $common --param BM=$bm --param BN=$bn --param BK=$bk --param TN=$tn \
        --param WARP_N=$wn --param STAGES=$st --emit /tmp/fused-emit --out /tmp/fused-emit-res > /dev/null
      cp /tmp/fused-emit/*.cu ".gpu/fused/${shape%%x*}_${bm}x${bn}x${bk}_tn${tn}_w${wn}_s${st}.cu"
    done
  done
  ls .gpu/fused
  exit 0
fi
out=${OUT:-/tmp/fused-out}
mkdir -p "$out" /tmp/fused-bin
ls .gpu/fused/*.cu | xargs -P 16 -I{} sh -c 'v={}; n=$(basename $v .cu); nvcc -O3 -arch=sm_90 -DVARIANT="\"$(realpath $v)\"" -o /tmp/fused-bin/$n '"$here"'/sgemm_fused.cu -lcublas 2> /tmp/fused-bin/$n.err || { echo "build $n failed"; cat /tmp/fused-bin/$n.err; }'
for round in 1 2; do
  for v in .gpu/fused/*.cu; do
    n=$(basename "$v" .cu); shape=${n%%_*}
    case $shape in 999) dims="999 1001 1003";; 1023) dims="1023 1025 1027";; *) continue;; esac
    echo "== round $round $n"
    [ -x /tmp/fused-bin/$n ] && /tmp/fused-bin/$n $dims 50
  done
done 2>&1 | tee "$out/fused.log"
