#!/usr/bin/env bash
# The GPU script: builds the binaries here, runs them on a machine with a GPU.
#
#   bash scripts/gpu.sh build            here: release binaries (tune, the GPU and planted-fault
#                                        test binaries, the tuned_transpose example), stripped,
#                                        into .gpu/ (git-ignored; copy it to the GPU machine)
#   bash scripts/gpu.sh tests [PART|TEST ...]
#                                        GPU machine: the GPU test suite, the planted faults and
#                                        the tuned_transpose example, in parts of at most 8
#                                        minutes on an H100 (one device call each): every part
#                                        in turn, or the named parts or tests. Each test runs in
#                                        its own process; each part ends with its counts. Exit
#                                        1 when a test failed, did not run or skipped (a GPU
#                                        test skips only where it finds no GPU), 2 for an
#                                        unknown name; $GPU_PART_LIMIT_S (default 540) stops a
#                                        part that runs longer
#   bash scripts/gpu.sh tests list       the parts and their tests
#   bash scripts/gpu.sh check [DB] [N]   GPU machine: `tune check` of results/best.csv (or DB), N
#                                        times in a row (default 1), a line per run (exit code,
#                                        seconds, PASS and FAIL counts); exit 1 when one failed
#   bash scripts/gpu.sh retune [OP:SHAPE:DTYPE ...]
#                                        GPU machine: re-tunes the rows of results/best.csv
#                                        with the default command into $OUT/best.csv (all of
#                                        them, a faster stored row stays; or the named ones,
#                                        replaced; $RETUNE_ARGS: extra `tune` arguments, e.g.
#                                        "--budget 400"). The shipped row still seeds the search
#                                        and wins ties unless clearly beaten: after a change of
#                                        the space, add --no-warm-start for a fresh contest
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
#   bash scripts/gpu.sh repeat [N] [ARGS ...]
#                                        GPU machine: the same-answer table of docs/benchmarks.md:
#                                        N (default 10) runs of each default command there (or
#                                        of each quoted ARGS, e.g. "--op sgemm --shape 511x513x515"),
#                                        each from an empty cubin cache and a new --out folder,
#                                        with each run's winner, % of roof and tie set
#   bash scripts/gpu.sh profile          GPU machine: Nsight Compute counters (clocks left as
#                                        they are) behind the gaps of docs/benchmarks.md: the
#                                        stored 8191x8191 f32 and f16 (and their tiles in the
#                                        row order), 4x1000000 bf16 and 999999x7 f16
#                                        transpose winners against copy_vec4 (DRAM bytes and
#                                        throughput, L2 sectors), and the default
#                                        999x777x555 sgemm winner and the stored 4096^3 one against
#                                        cuBLAS (grid, waves, occupancy, FMA pipe, instructions)
#   bash scripts/gpu.sh slurm [--no-gpu] GPU machine: the cluster path on a real single-node Slurm
#                                        (scripts/gpu-slurm.sh): prebuild, 2-task GPU array and
#                                        merge against an unsharded run of the same sweep; carry
#                                        .slurm/ (bash scripts/slurm-local.sh prefix) with .gpu/
#
# Logs and tables go to $OUT (default: gpu-out/, git-ignored); the `tune` runs' own --out
# folders are temporary, so $OUT holds a few files a device call can bring back whole.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mode=${1:-}
shift || true
# The built binaries (`build` writes them; $GPU_BIN points elsewhere, e.g. at stand-ins).
bin=${GPU_BIN:-.gpu}
[[ $bin == /* ]] || bin=$PWD/$bin

# The parts of `tests`, one line a test: PART BINARY TEST. BINARY is gpu (tests/gpu.rs), faults
# (tests/faults.rs) or example (the example TEST, whose exit status is its result). A part is
# one device call, at most 8 minutes on an H100; each exhaustive every_variant_* test is a part
# of its own. tests/gpu_parts.rs checks that every test of tests/gpu.rs and tests/faults.rs is
# named here exactly once.
parts_table='
transpose     gpu     chunk_read_transpose_variants_verify_at_odd_shapes_in_every_dtype
transpose     gpu     chunk_runs_transpose_variants_verify_at_odd_shapes_in_every_dtype
transpose     gpu     slab_transpose_variants_verify_at_short_sides_in_every_dtype
transpose     gpu     tall_matrices_past_65535_tile_rows_verify
sgemm         gpu     matmul_variants_verify_against_the_reference_and_cublas
sgemm         gpu     sgemm_searches_verify_every_measured_variant_at_odd_and_even_shapes
sgemm         gpu     repacked_and_windowed_sgemm_variants_verify_where_k_or_n_is_not_a_multiple_of_4
sgemm         gpu     element_wise_b_sgemm_variants_verify_where_only_k_or_n_is_odd
sgemm         gpu     four_byte_async_sgemm_variants_verify_at_any_shape
sgemm         gpu     sgemm_variants_past_48_kb_of_shared_memory_verify
sgemm         gpu     ksplit_sgemm_variants_verify_on_every_load_path
sgemm         gpu     tail_split_sgemm_variants_verify_on_every_load_path
sgemm         gpu     the_search_leaders_try_the_tail_split_and_it_verifies
pipeline      gpu     a_search_measures_the_stored_winners_first
pipeline      gpu     resume_reuses_the_journal_and_measures_only_what_is_missing
pipeline      gpu     ctrl_c_writes_what_was_measured_and_resume_finishes
pipeline      gpu     pruned_rows_can_be_left_out_of_the_run_csv
pipeline      gpu     the_vector_add_example_tunes_end_to_end_from_its_spec
pipeline      gpu     a_reference_that_leaves_elements_unwritten_is_refused
pipeline      gpu     the_winner_comes_with_a_confidence_interval
pipeline      gpu     the_gpu_is_warmed_up_before_the_first_timed_task
faults        gpu     wrong_results_are_failed_never_best
faults        gpu     a_faulting_kernel_is_recorded_and_the_run_goes_on
faults        gpu     a_hanging_kernel_is_killed_by_the_watchdog
faults        faults  compile_only_fails_exactly_the_compile_error_variants
faults        faults  emitted_sources_survive_kill_9
faults        faults  write_atomic_never_leaves_a_truncated_destination
faults        faults  every_planted_fault_is_recorded_and_the_run_goes_on
example       example tuned_transpose
exhaustive-1  gpu     every_variant_verifies_on_multiple_and_odd_shapes
exhaustive-2  gpu     every_variant_verifies_in_f64_and_f16
'

# The part names, in table order.
part_names() {
  awk 'NF == 3 && !seen[$1]++ { print $1 }' <<< "$parts_table"
}

# The rows "BINARY TEST" of part $1.
part_rows() {
  awk -v part="$1" '$1 == part { print $2, $3 }' <<< "$parts_table"
}

# run_test BINARY TEST LOG DEADLINE: one test in a process of its own (the test binary with
# --exact TEST, or the example), stopped at DEADLINE (seconds since the epoch). Prints one
# line; returns 0 passed, 1 failed or not run, 3 skipped.
run_test() {
  local kind=$1 name=$2 log=$3 deadline=$4 left t0 rc secs
  left=$((deadline - $(date +%s)))
  if [ "$left" -le 0 ]; then
    echo "not run: the part reached its limit of $part_limit s" > "$log"
    printf '  %-84s NOT RUN (the part reached its limit of %s s)\n' "$name" "$part_limit"
    return 1
  fi
  t0=$(date +%s)
  if [ "$kind" = example ]; then
    timeout -k 10 "$left" "$bin/$name" > "$log" 2>&1
  else
    timeout -k 10 "$left" "$bin/$kind-tests" --exact "$name" --include-ignored \
      --test-threads=1 > "$log" 2>&1
  fi
  rc=$?
  secs=$(($(date +%s) - t0))
  local verdict result=1
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    verdict="FAILED (stopped at the part's limit of $part_limit s)"
  elif [ "$rc" -ne 0 ]; then
    verdict="FAILED (exit $rc)"
  elif grep -q -F "SKIPPED $name:" "$log" ||
    { [ "$kind" = example ] && grep -q '^no CUDA GPU here' "$log"; }; then
    verdict=SKIPPED result=3
  elif [ "$kind" != example ] && ! grep -q '^test result: ok\. 1 passed' "$log"; then
    verdict="FAILED (no test of this name ran)"
  else
    verdict=ok result=0
  fi
  printf '  %-84s %s, %s s\n' "$name" "$verdict" "$secs"
  if [ "$result" -eq 1 ]; then
    # The panic and its message (at most 12 lines), else the end of the log.
    if grep -q 'panicked at' "$log"; then
      awk '/panicked at/ { on = 1 } /^failures:$|^note: run with/ { on = 0 }
           on && n++ < 12' "$log"
    else
      tail -n 12 "$log"
    fi | awk '{ print "      | " $0 }'
  fi
  return "$result"
}

# run_part LABEL: the tests of the rows on stdin ("BINARY TEST"), each in its own process,
# then one counts line. LABEL is the part's name, then what of it runs when not all of it.
# Adds to the totals; the logs go to $OUT/tests/PART/TEST.log.
run_part() {
  local label=$1 kind name passed=0 failed=0 skipped=0 t0 rc deadline
  local dir=$OUT/tests/${label%% *}
  mkdir -p "$dir"
  echo "== part $label"
  t0=$(date +%s)
  deadline=$((t0 + part_limit))
  while read -r kind name; do
    run_test "$kind" "$name" "$dir/$name.log" "$deadline" < /dev/null
    rc=$?
    case $rc in
      0) passed=$((passed + 1)) ;;
      3) skipped=$((skipped + 1)) ;;
      *) failed=$((failed + 1)) ;;
    esac
  done
  echo "part $label: $passed passed, $failed failed, $skipped skipped ($(($(date +%s) - t0)) s)"
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  total_skipped=$((total_skipped + skipped))
  if [ $((failed + skipped)) -gt 0 ]; then
    bad_parts+=("$label")
  fi
}

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
  if [ "${1:-}" = list ]; then
    for part in $(part_names); do
      echo "$part"
      part_rows "$part" | awk '{ printf "  %-8s %s\n", $1, $2 }'
    done
    exit 0
  fi
  # What to run: every part, or the named parts and tests (a test alone, under its part).
  jobs=()
  [ $# -eq 0 ] && mapfile -t jobs < <(part_names)
  for arg in "$@"; do
    if [ -n "$(part_rows "$arg")" ]; then
      jobs+=("$arg")
    elif awk -v t="$arg" '$3 == t { found = 1 } END { exit !found }' <<< "$parts_table"; then
      jobs+=("$arg")
    else
      echo "error: no part or test named '$arg' (bash scripts/gpu.sh tests list)" >&2
      exit 2
    fi
  done
  # The tests start worker processes of `tune` ($TUNE_EXE, default the one built with them).
  export TUNE_EXE=${TUNE_EXE:-$bin/tune}
  for exe in gpu-tests faults-tests $(awk '$2 == "example" { print $3 }' <<< "$parts_table"); do
    [ -x "$bin/$exe" ] || missing=$bin/$exe
  done
  [ -x "$TUNE_EXE" ] || missing=$TUNE_EXE
  if [ -n "${missing:-}" ]; then
    echo "error: no $missing: run 'bash scripts/gpu.sh build' on the build machine and copy its .gpu/ here" >&2
    exit 1
  fi
  part_limit=${GPU_PART_LIMIT_S:-540}
  if ! [[ $part_limit =~ ^[1-9][0-9]*$ ]]; then
    echo "error: GPU_PART_LIMIT_S must be a whole number of seconds, not '$part_limit'" >&2
    exit 2
  fi
  mkdir -p "$OUT"
  export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-$(mktemp -d)}
  total_passed=0 total_failed=0 total_skipped=0 bad_parts=()
  t0=$(date +%s)
  for job in "${jobs[@]}"; do
    # Not in a pipeline: run_part adds to the totals of this shell.
    if [ -n "$(part_rows "$job")" ]; then
      run_part "$job" < <(part_rows "$job")
    else
      run_part "$(awk -v t="$job" '$3 == t { print $1 }' <<< "$parts_table") ($job)" \
        < <(awk -v t="$job" '$3 == t { print $2, $3 }' <<< "$parts_table")
    fi
  done
  if [ "${#jobs[@]}" -gt 1 ]; then
    echo "all: $total_passed passed, $total_failed failed, $total_skipped skipped ($(($(date +%s) - t0)) s)"
  fi
  if [ "${#bad_parts[@]}" -gt 0 ]; then
    [ "$total_skipped" -gt 0 ] &&
      echo "a skipped test did not run: GPU tests skip only where they find no GPU"
    echo "not passed: ${bad_parts[*]}"
    exit 1
  fi
  ;;
check)
  mkdir -p "$OUT"
  db=${1:-results/best.csv}
  runs=${2:-1}
  [[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "check: N must be a positive number, not '$runs'" >&2; exit 2; }
  worst=0
  for i in $(seq 1 "$runs"); do
    t0=$(date +%s)
    "$bin/tune" check --db "$db" > "$OUT/check-$i.log" 2>&1
    rc=$?
    (( rc > worst )) && worst=$rc
    (( runs == 1 )) && cat "$OUT/check-$i.log"
    echo "check $i of $runs: exit $rc, $(( $(date +%s) - t0 )) s, $(grep -c '^PASS' "$OUT/check-$i.log") PASS, $(grep -c '^FAIL' "$OUT/check-$i.log") FAIL"
  done
  exit "$worst"
  ;;
retune)
  # No arguments: every (op, shape, dtype) of results/best.csv, a faster stored row stays.
  # OP:SHAPE:DTYPE arguments: only those, and their stored rows are replaced. The runs' --out
  # folder is scratch; $OUT gets best.csv and retune.log (every run's output) alone.
  mkdir -p "$OUT"
  runs=$(mktemp -d)
  if [ $# -eq 0 ]; then
    cp results/best.csv "$runs/best.csv"
    todo=$(tail -n +2 results/best.csv | cut -d, -f1-3 | sort -u | tr , :)
    keep=--keep-best
  else
    todo="$*"
    keep=
    # Only this GPU's rows of the named items are replaced.
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i "${CUDA_VISIBLE_DEVICES:-0}" | head -1)
    pattern=$(printf "^%s,$gpu,|" "$@" | tr : , | sed 's/|$//')
    grep -v -E "$pattern" results/best.csv > "$runs/best.csv"
  fi
  : > "$OUT/retune.log"
  for item in $todo; do
    IFS=: read -r op shape dtype <<< "$item"
    t0=$(date +%s%N)
    # shellcheck disable=SC2086
    "$bin/tune" --op "$op" --shape "$shape" --dtype "$dtype" $keep ${RETUNE_ARGS:-} \
      --out "$runs" > "$runs/last.log" 2>&1
    rc=$?
    { echo "== tune --op $op --shape $shape --dtype $dtype: exit $rc"; cat "$runs/last.log"; } >> "$OUT/retune.log"
    echo "$op $shape $dtype: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms; $(grep -m1 '^Best' "$runs/last.log" | cut -c1-160)"
  done
  cp "$runs/best.csv" "$OUT/best.csv"
  rm -rf "$runs"
  ;;
bench)
  mkdir -p "$OUT"
  cache=$(mktemp -d)
  # The runs' --out folder: scratch, outside $OUT (it holds a CSV of every configuration).
  runs=$(mktemp -d)
  md="$OUT/benchmarks.md"
  # row LABEL ARGS...: one whole `tune` process, its wall time, phases, winner and the rank
  # the search's model first gave the winner.
  row() {
    local label=$1; shift
    local t0 text rc ms
    t0=$(date +%s%N)
    text=$(CUDA_AUTOTUNE_CACHE=$cache "$bin/tune" "$@" --out "$runs" 2>>"$OUT/bench-stderr.log")
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
      rm -rf "$cache" "$runs"; mkdir -p "$cache" "$runs"
      # shellcheck disable=SC2086
      row cold $args
      # shellcheck disable=SC2086
      row warm $args
      case "$args" in
        *sgemm*)
          # The search alone: no stored winner of any shape to start from.
          rm -rf "$cache" "$runs"; mkdir -p "$cache" "$runs"
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
  rm -rf "$cache" "$runs"
  cat "$md"
  ;;
roof)
  mkdir -p "$OUT"
  md="$OUT/roof.md"
  # once ARGS...: one whole `tune` process from an empty cache and folder; prints
  # "PERCENT ROOF|WALL_S|PARAMETERS".
  once() {
    local cache runs t0 text ms
    cache=$(mktemp -d)
    runs=$(mktemp -d)
    t0=$(date +%s%N)
    text=$(CUDA_AUTOTUNE_CACHE=$cache "$bin/tune" "$@" --out "$runs" 2>>"$OUT/roof-stderr.log")
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    printf '== tune %s\n%s\nwall_ms %s\n' "$*" "$text" "$ms" >> "$OUT/roof.log"
    rm -rf "$cache" "$runs"
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
repeat)
  mkdir -p "$OUT"
  n=${1:-10}
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "repeat: N must be a positive number, not '$n'" >&2; exit 2; }
  shift || true
  commands=("$@")
  [ ${#commands[@]} -gt 0 ] || commands=("--op transpose --shape 1000x1000" \
    "--op transpose --shape 2049x17" "--op sgemm --shape 1000x1000x1000")
  {
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/Device: /'
    echo
    echo "| command | runs | distinct winners | runs with the most frequent winner | % of roof | tie set | wall s |"
    echo "|---|---|---|---|---|---|---|"
    for args in "${commands[@]}"; do
      one=$(mktemp)
      for _ in $(seq 1 "$n"); do
        cache=$(mktemp -d); dir=$(mktemp -d)
        t0=$(date +%s%N)
        # shellcheck disable=SC2086
        text=$(CUDA_AUTOTUNE_CACHE=$cache "$bin/tune" $args --out "$dir" 2>>"$OUT/repeat-stderr.log")
        ms=$(( ($(date +%s%N) - t0) / 1000000 ))
        printf '== tune %s\n%s\nwall_ms %s\n' "$args" "$text" "$ms" >> "$OUT/repeat.log"
        best=$(echo "$text" | grep -m1 '^Best:')
        tied=$(echo "$text" | grep -m1 '^Confidence:' | grep -oE 'tied with [0-9]+' | grep -oE '[0-9]+')
        # winner|percent|others tied|wall seconds
        echo "$(echo "$best" | sed 's/^Best: //; s/  .*//')|$(echo "$best" | grep -oE '[0-9.]+% of' | head -1 | cut -d% -f1)|${tied:-0}|$((ms / 1000)).$(printf %01d $((ms % 1000 / 100)))" >> "$one"
        rm -rf "$cache" "$dir"
      done
      winners=$(cut -d'|' -f1 "$one" | sort | uniq -c | sort -rn)
      distinct=$(echo "$winners" | grep -c .)
      most=$(echo "$winners" | head -1 | awk '{print $1}')
      pct=$(cut -d'|' -f2 "$one" | sort -n | sed -n '1p;$p' | paste -sd- -)
      ties=$(cut -d'|' -f3 "$one" | sort -n | sed -n '1p;$p' | paste -sd- -)
      wall=$(cut -d'|' -f4 "$one" | sort -n | sed -n '1p;$p' | paste -sd- -)
      echo "| \`$args\` | $n | $distinct | $most | $pct % | $ties others | $wall |"
      rm -f "$one"
    done
  } | tee "$OUT/repeat.md"
  ;;
profile)
  mkdir -p "$OUT"
  ncu=$(command -v ncu)
  for f in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
    [ -n "$ncu" ] || { [ -x "$f" ] && ncu=$f; }
  done
  [ -n "$ncu" ] || { echo "profile: Nsight Compute (ncu) not found" >&2; exit 1; }
  export CUDA_AUTOTUNE_CACHE=${CUDA_AUTOTUNE_CACHE:-$(mktemp -d)}
  # pin PARAMS: `--param NAME=value` for each NAME=value of a `;`-separated configuration.
  pin() { echo "$1" | tr ';' '\n' | grep . | sed 's/^/--param /' | tr '\n' ' '; }
  # pin_row OP PARAMS: pin PARAMS, a stored row's configuration, and each parameter the row
  # predates at the value such rows stand for (`tune params --json`), so the run has one variant.
  pin_row() {
    pin "$2"
    "$bin/tune" params --op "$1" --json | python3 -c '
import json, sys
given = {kv.split("=")[0] for kv in sys.argv[1].split(";") if kv}
for p in json.load(sys.stdin)["params"]:
    v = p["missing"]
    if v is not None and p["name"] not in given:
        print("--param %s=%s" % (p["name"], str(v).lower() if isinstance(v, bool) else v), end=" ")' "$2"
  }
  # counters METRICS KERNEL_REGEX TUNE_ARGS...: the third launch of the matching kernel in a
  # pinned run (after verification and warm-up), clocks left alone (--clock-control none).
  counters() {
    local metrics=$1 kernel=$2; shift 2
    timeout 120 "$ncu" --clock-control none --target-processes all -k "regex:$kernel" \
      --launch-skip 2 --launch-count 1 --metrics "$metrics" \
      "$bin/tune" "$@" --confirm-rounds 0 --reps 5 --out "$(mktemp -d)" 2>&1 |
      grep -E '^ +[a-z_]+ \(|^ +(gpu|dram|lts|launch|sm|smsp)__'
  }
  {
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/Device: /'
    # Memory traffic, and how busy the SMs are meanwhile (registers, warps resident, issue).
    mem=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i "${CUDA_VISIBLE_DEVICES:-0}" | head -1)
    # stored OP SHAPE DTYPE: this GPU's stored winner (the first row of any GPU where it has none).
    stored() { { grep "^$1,$2,$3,$gpu," results/best.csv; grep "^$1,$2,$3," results/best.csv; } | head -1 | cut -d, -f6; }
    # Large odd-stride transposes in a 4- and a 2-byte type, and two narrow ones
    # (launch-sized: 8 and 14 MB). A stored tile taken down its columns (BLOCK_ORDER=columns)
    # is profiled in the row order too: the same tile, the other order.
    for item in 8191x8191:f32 8191x8191:f16 4x1000000:bf16 999999x7:f16; do
      IFS=: read -r shape dtype <<< "$item"
      params=$(stored transpose "$shape" "$dtype")
      for kernel in transpose copy_vec4; do
        echo "== transpose $shape $dtype, kernel $kernel"
        # shellcheck disable=SC2046
        counters "$mem" "^$kernel\$" --op transpose --shape "$shape" --dtype "$dtype" $(pin_row transpose "$params")
      done
      if [[ $params == *BLOCK_ORDER=columns* ]]; then
        echo "== transpose $shape $dtype, kernel transpose, BLOCK_ORDER=rows"
        # shellcheck disable=SC2046
        counters "$mem" "^transpose\$" --op transpose --shape "$shape" --dtype "$dtype" \
          $(pin_row transpose "${params/BLOCK_ORDER=columns/BLOCK_ORDER=rows}")
      fi
    done
    run=$(CUDA_AUTOTUNE_CACHE=$CUDA_AUTOTUNE_CACHE "$bin/tune" --op sgemm --shape 999x777x555 --out "$(mktemp -d)" 2>/dev/null)
    echo "$run" | grep -m1 '^Best'
    params=$(echo "$run" | grep -m1 '^Best:' | sed 's/^Best: //; s/  .*//' | tr ' ' ';')
    sm=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__waves_per_multiprocessor,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
    for kernel in '^sgemm$' 'gemm_|xmma|cutlass'; do
      echo "== sgemm 999x777x555, kernel $kernel (the second: cuBLAS's)"
      # shellcheck disable=SC2046
      counters "$sm" "$kernel" --op sgemm --shape 999x777x555 $(pin "$params")
    done
    # 4096^3, this GPU's stored winner: the FFMAs are the same work as cuBLAS's; the other
    # instructions and the FMA pipe's share of the cycles are where the gap is.
    params=$(stored sgemm 4096x4096x4096 f32)
    for kernel in '^sgemm$' 'gemm_|xmma|cutlass'; do
      echo "== sgemm 4096x4096x4096, kernel $kernel (the second: cuBLAS's)"
      # shellcheck disable=SC2046
      counters "$sm,sm__inst_executed.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum" "$kernel" \
        --op sgemm --shape 4096x4096x4096 $(pin_row sgemm "$params")
    done
  } | tee "$OUT/profile.txt"
  ;;
slurm)
  OUT=$OUT GPU_BIN=$bin exec bash scripts/gpu-slurm.sh run "$@"
  ;;
*)
  sed -n '2,/^set /p' "$0" | grep -v '^set ' | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
