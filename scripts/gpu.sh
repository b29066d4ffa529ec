#!/usr/bin/env bash
# The GPU script: builds the binaries here, runs them on a machine with a GPU.
#
#   bash scripts/gpu.sh build            here: release binaries (tune, the GPU and planted-fault
#                                        test binaries, the tuned_transpose example), stripped,
#                                        into .gpu/ (git-ignored; copy it to the GPU machine)
#   bash scripts/gpu.sh tests [FILTER]   GPU machine: the GPU test suite, the planted faults and
#                                        the tuned_transpose example (FILTER: test-name filter)
#   bash scripts/gpu.sh check [DB]       GPU machine: `tune check` of results/best.csv (or DB)
#   bash scripts/gpu.sh retune [OP:SHAPE:DTYPE ...]
#                                        GPU machine: re-tunes the rows of results/best.csv
#                                        with the default command into $OUT/best.csv (all of
#                                        them, a faster stored row stays; or the named ones,
#                                        replaced; $RETUNE_ARGS: extra `tune` arguments, e.g.
#                                        "--budget 400")
#   bash scripts/gpu.sh bench            GPU machine: the tuning-time table of docs/benchmarks.md
#                                        (whole-process wall time, empty and warm cubin cache,
#                                        phases, the model's first rank of the winner, winner
#                                        as % of the roof; for sgemm also the search without
#                                        stored winners, and Triton's autotune in the same run:
#                                        scripts/peers/triton_sgemm.py), then the stored
#                                        winners of results/best.csv as % of their roof
#   bash scripts/gpu.sh roof             GPU machine: the shapes-and-GPUs table of
#                                        docs/benchmarks.md (each row: the default command and
#                                        `--budget 400`, both from an empty cache and folder:
#                                        winner as % of the same-run roof, wall time)
#
# Logs and tables go to $OUT (default: gpu-out/, git-ignored).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mode=${1:-}
shift || true
bin=.gpu

case "$mode" in
build)
  set -e
  target=${CARGO_TARGET_DIR:-target}
  cargo build --release --bin tune --example tuned_transpose
  mkdir -p "$bin"
  cp "$target/release/tune" "$target/release/examples/tuned_transpose" "$bin/"
  for t in gpu faults; do
    exe=$(cargo test --release --test "$t" --no-run --message-format=json 2>/dev/null |
      python3 -c 'import json,sys; [print(m["executable"]) for m in map(json.loads, sys.stdin) if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["kind"]==["test"]]')
    cp "$exe" "$bin/$t-tests"
  done
  # The device tool carries at most 64 MiB with the working tree.
  strip "$bin"/*
  ls -la "$bin"
  ;;
tests)
  mkdir -p "$OUT"
  export TUNE_EXE=$PWD/$bin/tune CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-$(mktemp -d)}
  "$bin/gpu-tests" --test-threads=1 "$@" > "$OUT/gpu-tests.log" 2>&1
  grep -E "^test |test result|panicked|SKIPPED" "$OUT/gpu-tests.log"
  if [ $# -eq 0 ]; then
    "$bin/faults-tests" --test-threads=1 > "$OUT/faults-tests.log" 2>&1
    grep -E "test result|panicked|SKIPPED" "$OUT/faults-tests.log"
    "$bin/tuned_transpose" > "$OUT/tuned_transpose.log" 2>&1
    echo "tuned_transpose: exit $?"; tail -3 "$OUT/tuned_transpose.log"
  fi
  ;;
check)
  mkdir -p "$OUT"
  "$bin/tune" check --db "${1:-results/best.csv}" 2>&1 | tee "$OUT/check.log"
  exit "${PIPESTATUS[0]}"
  ;;
retune)
  # No arguments: every (op, shape, dtype) of results/best.csv, a faster stored row stays.
  # OP:SHAPE:DTYPE arguments: only those, and their stored rows are replaced.
  mkdir -p "$OUT/runs"
  if [ $# -eq 0 ]; then
    cp results/best.csv "$OUT/runs/best.csv"
    todo=$(tail -n +2 results/best.csv | cut -d, -f1-3 | sort -u | tr , :)
    keep=--keep-best
  else
    todo="$*"
    keep=
    # Only this GPU's rows of the named items are replaced.
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i "${CUDA_VISIBLE_DEVICES:-0}" | head -1)
    pattern=$(printf "^%s,$gpu,|" "$@" | tr : , | sed 's/|$//')
    grep -v -E "$pattern" results/best.csv > "$OUT/runs/best.csv"
  fi
  for item in $todo; do
    IFS=: read -r op shape dtype <<< "$item"
    t0=$(date +%s%N)
    # shellcheck disable=SC2086
    "$bin/tune" --op "$op" --shape "$shape" --dtype "$dtype" $keep ${RETUNE_ARGS:-} \
      --out "$OUT/runs" > "$OUT/runs/$op-$shape-$dtype.log" 2>&1
    rc=$?
    echo "$op $shape $dtype: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms; $(grep -m1 '^Best' "$OUT/runs/$op-$shape-$dtype.log" | cut -c1-160)"
  done
  cp "$OUT/runs/best.csv" "$OUT/best.csv"
  ;;
bench)
  mkdir -p "$OUT"
  cache=$(mktemp -d)
  md="$OUT/benchmarks.md"
  # row LABEL ARGS...: one whole `tune` process, its wall time, phases, winner and the rank
  # the search's model first gave the winner.
  row() {
    local label=$1; shift
    local t0 text rc ms
    t0=$(date +%s%N)
    text=$(CUDA_AUTOTUNE_CACHE=$cache "$bin/tune" "$@" --out "$OUT/bench-runs" 2>>"$OUT/bench-stderr.log")
    rc=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    printf '== %s: tune %s\n%s\nexit %s wall_ms %s\n' "$label" "$*" "$text" "$rc" "$ms" >> "$OUT/bench.log"
    local phases best rank
    phases=$(echo "$text" | sed -n 's/^Time: .*(\(.*\))$/\1/p')
    best=$(echo "$text" | grep -m1 '^Best' | sed 's/^Best: //' | cut -c1-160)
    rank=$(echo "$text" | sed -n 's/.*first fit ranked the winner \([0-9]* of [0-9]*\).*/\1/p')
    echo "| \`$*\` | $label | $((ms / 1000)).$(printf %03d $((ms % 1000))) | $phases | ${rank:--} | $best |"
  }
  # peer SHAPE: Triton's autotune on the same SGEMM, one whole process, empty Triton cache.
  peer() {
    local t0 text ms
    t0=$(date +%s%N)
    text=$(TRITON_CACHE_DIR=$(mktemp -d) timeout 300 python3 scripts/peers/triton_sgemm.py "$1" 2>>"$OUT/bench-stderr.log")
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "$text" >> "$OUT/bench.log"
    echo "| \`triton_sgemm.py $1\` | Triton autotune, empty cache | $((ms / 1000)).$(printf %03d $((ms % 1000))) | | | $text |"
  }
  {
    echo "| command | cache | wall s | phases | model rank of winner | best |"
    echo "|---|---|---|---|---|---|"
    for args in "--op transpose --shape 1000x1000" \
                "--op transpose --shape 8x1000000 --dtype f16" \
                "--op transpose --shape 4097x33" \
                "--op transpose --shape 8191x8191" \
                "--op sgemm --shape 4096x4096x4096" \
                "--op sgemm --shape 1000x1000x1000" \
                "--op sgemm --shape 32x8192x8192" \
                "--op sgemm --shape 128x128x128"; do
      rm -rf "$cache" "$OUT/bench-runs"; mkdir -p "$cache"
      # shellcheck disable=SC2086
      row cold $args
      # shellcheck disable=SC2086
      row warm $args
      case "$args" in
        *sgemm*)
          # The search alone: no stored winner of any shape to start from.
          rm -rf "$cache" "$OUT/bench-runs"; mkdir -p "$cache"
          # shellcheck disable=SC2086
          row "cold, --no-warm-start" $args --no-warm-start
          peer "${args##* }" ;;
      esac
    done
    echo
    echo "| op | shape | dtype | % of roof | roof | parameters |"
    echo "|---|---|---|---|---|---|"
    tail -n +2 results/best.csv | sort -t, -k1,1 -k3,3 -k2,2V |
      awk -F, '{ printf "| %s | %s | %s | %.1f %% | %s | `%s` |\n", $1, $2, $3, 100 * $10, $11, $6 }'
  } > "$md"
  cat "$md"
  ;;
roof)
  mkdir -p "$OUT"
  md="$OUT/roof.md"
  # once ARGS...: one whole `tune` process from an empty cache and folder; prints
  # "PERCENT ROOF|WALL_S|PARAMETERS".
  once() {
    local cache t0 text ms
    cache=$(mktemp -d)
    rm -rf "$OUT/roof-runs"
    t0=$(date +%s%N)
    text=$(CUDA_AUTOTUNE_CACHE=$cache "$bin/tune" "$@" --out "$OUT/roof-runs" 2>>"$OUT/roof-stderr.log")
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    printf '== tune %s\n%s\nwall_ms %s\n' "$*" "$text" "$ms" >> "$OUT/roof.log"
    rm -rf "$cache"
    echo "$text" | grep -m1 '^Best' |
      sed -E 's/^Best: (.*)  [0-9.]+ [A-Za-z/]+, ([0-9.]+% of [A-Za-z0-9_]+).*/\2|'"$((ms / 1000)).$(printf %03d $((ms % 1000)))"'|\1/'
  }
  {
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/Device: /'
    echo
    echo "| command | default: % of roof | wall s | \`--budget 400\`: % of roof | wall s | default winner |"
    echo "|---|---|---|---|---|---|"
    for args in "--op transpose --shape 3x1000000" \
                "--op transpose --shape 8x1000000 --dtype f16" \
                "--op transpose --shape 1000000x3" \
                "--op transpose --shape 5x1000000 --dtype f64" \
                "--op transpose --shape 1000000x8 --dtype f16" \
                "--op transpose --shape 4x1000000 --dtype bf16" \
                "--op transpose --shape 999999x7 --dtype f16" \
                "--op transpose --shape 8191x8191" \
                "--op transpose --shape 6007x7001" \
                "--op transpose --shape 1000x1000" \
                "--op sgemm --shape 4096x4096x4096" \
                "--op sgemm --shape 999x777x555" \
                "--op sgemm --shape 1000x1000x1000"; do
      # shellcheck disable=SC2086
      IFS='|' read -r dpct dwall dwin <<< "$(once $args)"
      # shellcheck disable=SC2086
      IFS='|' read -r wpct wwall _ <<< "$(once $args --budget 400)"
      echo "| \`$args\` | $dpct | $dwall | $wpct | $wwall | \`$dwin\` |"
    done
  } > "$md"
  cat "$md"
  ;;
*)
  sed -n '2,/^set /p' "$0" | grep -v '^set ' | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
