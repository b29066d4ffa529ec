# Sourced by the GPU-machine scripts (gpu-dtype.sh, gpu-sgemm3.sh, ...); needs $OUT and $log.
# Sourcing it creates $OUT and starts $log with the GPU's name, driver, clocks and temperature.
# `run ARGS...` runs .gpu/tune ARGS --out ${RESULTS:-$OUT/results}: its report goes to the
# terminal and is appended to $log, its stderr to $OUT/stderr.log, and a last line gives its
# exit code and wall time. Set RESULTS for one call (`RESULTS=DIR run ...`) to keep runs that
# write the same file names apart.
run() {
  echo | tee -a "$log"
  echo "== tune $*" | tee -a "$log"
  local t0=$(date +%s%N)
  ./.gpu/tune "$@" --out "${RESULTS:-$OUT/results}" 2>>"$OUT/stderr.log" | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "exit $rc, wall $((ms / 1000)).$(printf %03d $((ms % 1000))) s" | tee -a "$log"
}

mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee -a "$log"
