#!/usr/bin/env bash
# Tuning-speed benchmark (runs on the GPU machine, from binaries in .gpu/): wall time of the
# whole `tune` process, cold and warm cubin cache, with the phase breakdown the tool prints,
# plus a slow careful run (300 reps, no adaptive cut) to check that the fast runs pick the
# same winner at the same time. Writes a Markdown table to $OUT/tuning_speed.md.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
TUNE=${TUNE:-./.gpu/tune}
cache=/tmp/ca-speed-cache
md="$OUT/tuning_speed.md"
log="$OUT/tuning_speed.log"
: > "$log"
one() { # label, then tune args; prints a table row
  local label=$1; shift
  local t0=$(date +%s%N)
  local text
  text=$(CUDA_AUTOTUNE_CACHE=$cache "$TUNE" "$@" --out /tmp/ca-speed-results 2>/dev/null)
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  { echo "== $label: tune $*"; echo "$text"; echo "exit $rc wall_ms $ms"; } >> "$log"
  local phases=$(echo "$text" | sed -n 's/^Time: .*(\(.*\))$/\1/p')
  local best=$(echo "$text" | sed -n 's/^Best: \(.*\)  \([0-9.]*\) GB\/s, \([0-9.]*%\) of \([a-z_0-9]*\) (\([0-9.]*\) ms median.*/\1 | \2 | \3 | \5/p')
  echo "| $label | \`$*\` | $((ms / 1000)).$(printf %03d $((ms % 1000))) | $phases | $best |"
}
{
  echo "| run | command | wall s | phases | best configuration | GB/s | % of roof | median ms |"
  echo "|---|---|---|---|---|---|---|---|"
  for shape in 1000x1000 8192x8192; do
    for i in 1 2 3; do
      rm -rf "$cache"
      one "$shape cold cache #$i" --op transpose --shape $shape
    done
    for i in 1 2 3; do
      one "$shape warm cache #$i" --op transpose --shape $shape
    done
    one "$shape careful (300 reps, no adaptive)" --op transpose --shape $shape --reps 300 --no-adaptive
    one "$shape no adaptive" --op transpose --shape $shape --no-adaptive
    one "$shape in-process, no cache" --op transpose --shape $shape --in-process --no-cache
  done
} > "$md"
cat "$md"
