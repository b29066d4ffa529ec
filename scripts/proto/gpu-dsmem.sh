#!/usr/bin/env bash
# Session 14 (issue 10): deeper cp.async rings for the windowed kernels (sgemm_dsmem.cu).
#   bash scripts/proto/gpu-dsmem.sh render   on the build machine: a copy of templates/ in
#                                             .gpu/tpl2 whose sgemm takes its slice buffers as
#                                             dynamic shared memory past 48 KB (constraint 227 KB),
#                                             and the windowed sources of 10 tiles x STAGES 2-4 at
#                                             999x1001x1003 in .gpu/dsm/ (git-ignored)
#   bash scripts/proto/gpu-dsmem.sh render4096  the same template copy, aligned tiles at 4096^3
#                                             (w_ files run at 999x1001x1003, a_ ones at 4096^3)
#   bash scripts/proto/gpu-dsmem.sh          on the GPU machine (carry .gpu/dsm): builds
#                                             sgemm_dsmem.cu once per source and runs each, two
#                                             rounds; log in $OUT/dsmem.log
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = render ] || [ "${1:-}" = render4096 ]; then
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-$(scripts/nvrtc-env.sh)}
  rm -rf .gpu/tpl2 .gpu/dsm && cp -r templates .gpu/tpl2 && mkdir -p .gpu/dsm
  python3 - <<'PY'
p = '.gpu/tpl2/sgemm.cu.tera'
s = open(p).read()
old = '    __shared__ __align__(16) float smem[SMEM_FLOATS];'
assert old in s
s = s.replace(old, '#if SMEM_FLOATS * 4 > 49152\n    extern __shared__ __align__(16) float smem[];\n#else\n' + old + '\n#endif')
open(p, 'w').write(s)
p = '.gpu/tpl2/sgemm.toml'
s = open(p).read()
old = 'expr = "SMEM_BYTES <= MAX_SHARED_PER_BLOCK"'
assert old in s
open(p, 'w').write(s.replace(old, 'expr = "SMEM_BYTES <= 232448"'))
PY
  common="--param TM=8 --param BOUNDS=specialized --param KSPLIT=1 --param GROUP_M=8
    --param OCCUPANCY=0 --param ORDER=snakek --param CSTORE=scalar --param LOAD=async --param REPACK=0 --param VEC=4"
  if [ "$1" = render ]; then
    shape=999x1001x1003 prefix=w stages="2 3 4"
    common="$common --param PAD=0 --param WINDOWS=1 --param B_ELEMS=0"
    tiles="64x64x32x4x16x0 64x64x32x4x8x0 32x64x32x4x16x0 64x128x16x4x16x0 64x128x32x4x16x0 64x64x16x4x16x0
           32x64x16x4x8x0 128x64x16x4x8x0 128x64x32x4x16x0 64x128x16x8x16x0"
  else
    # The 4096^3 winner (64x128x16 TN=8 PAD=4 STAGES=2) and its neighbours, deeper.
    shape=4096x4096x4096 prefix=a stages="2 3 4"
    common="$common --param WINDOWS=0 --param B_ELEMS=0"
    tiles="64x128x16x8x16x4 64x128x32x8x16x0 64x128x32x8x16x4 128x128x16x8x16x4 128x128x32x8x16x0
           64x64x32x8x8x0 128x64x32x8x8x0"
  fi
  for t in $tiles; do
    IFS=x read -r bm bn bk tn wn pad <<< "$t"
    for st in $stages; do
      rm -rf /tmp/dsm-emit
      cargo run --release --quiet -- --op sgemm --shape "$shape" --templates .gpu/tpl2 --compile-only \
        --arch sm_90 --strategy exhaustive $common --param BM=$bm --param BN=$bn --param BK=$bk --param TN=$tn \
        --param WARP_N=$wn --param PAD=$pad --param STAGES=$st --emit /tmp/dsm-emit --out /tmp/dsm-emit-res > /dev/null 2>&1
      [ "$(ls /tmp/dsm-emit 2>/dev/null | wc -l)" = 1 ] && \
        cp /tmp/dsm-emit/*.cu ".gpu/dsm/${prefix}_${bm}x${bn}x${bk}_tn${tn}_w${wn}_p${pad}_s${st}.cu"
    done
  done
  ls .gpu/dsm
  exit 0
fi
out=${OUT:-/tmp/dsmem-out}
mkdir -p "$out" /tmp/dsm-bin
ls .gpu/dsm/*.cu | xargs -P 16 -I{} sh -c 'v={}; n=$(basename $v .cu); nvcc -O3 -arch=sm_90 -DVARIANT="\"$(realpath $v)\"" -o /tmp/dsm-bin/$n '"$here"'/sgemm_dsmem.cu -lcublas 2> /tmp/dsm-bin/$n.err || { echo "build $n failed"; cat /tmp/dsm-bin/$n.err; }'
for round in 1 2; do
  for v in .gpu/dsm/*.cu; do
    n=$(basename "$v" .cu)
    case $n in w_*) dims="999 1001 1003";; *) dims="4096 4096 4096";; esac
    echo "== round $round $n"
    [ -x /tmp/dsm-bin/$n ] && /tmp/dsm-bin/$n $dims 20
  done
done 2>&1 | tee "$out/dsmem.log"
