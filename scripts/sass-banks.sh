#!/usr/bin/env bash
# Register-bank reads of one sgemm variant's main loop, from its SASS (no GPU needed): builds the
# variant with NVRTC through `tune --compile-only` into a throw-away cubin cache, disassembles it
# with cuobjdump (PyPI wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm, installed into
# .nvrtc/tools), and counts, in
# the largest loop, the FFMAs that read two register operands from one bank. Model (from
# microbenchmarks of Volta and Ampere; not a hardware counter): two banks, by register parity;
# an operand is free when the instruction before had the same register in the same slot marked
# .reuse. README footnote 5 (session 8) used it to compare ORDER and CSTORE. Only the largest
# loop is counted: give one BOUNDS mode (edge has a checked and an unchecked copy of the loop).
# ARCH (default sm_90) picks the target.
# Usage: bash scripts/sass-banks.sh --shape 4096x4096x4096 --param BM=64 --param BN=64 ... (one variant)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvrtc=$("$root/scripts/nvrtc-env.sh")
export LD_LIBRARY_PATH="$nvrtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tools="$root/.nvrtc/tools"
cuobjdump="$tools/nvidia/cu13/bin/cuobjdump"
if [ ! -x "$cuobjdump" ] || [ ! -x "$tools/nvidia/cu13/bin/nvdisasm" ]; then
  rm -rf "$tools"  # pip --target does not merge into a folder an earlier install left
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$tools" \
    'nvidia-cuda-cuobjdump>=13.0,<14' 'nvidia-cuda-nvdisasm>=13.0,<14' >&2
fi
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
tune=${TUNE:-"$root/target/release/tune"}
CUDA_AUTOTUNE_CACHE=$cache "$tune" --op sgemm --compile-only --arch "${ARCH:-sm_90}" --strategy exhaustive "$@" >&2
n=$(find "$cache" -name "*.bin" | wc -l)
[ "$n" = 1 ] || { echo "expected exactly one variant, got $n: narrow it with --param" >&2; exit 2; }
python3 - "$(find "$cache" -name "*.bin")" "$cuobjdump" <<'PY'
import collections, re, subprocess, sys, tempfile
blob = open(sys.argv[1], "rb").read()
at = blob.find(b"\x7fELF")  # the cache entry has a header before the cubin
if at < 0:
    sys.exit("no ELF image in the cached cubin")
elf = blob[at:]
with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
    f.write(elf); f.flush()
    sass = subprocess.run([sys.argv[2], "-sass", f.name], capture_output=True, text=True, check=True).stdout
    usage = subprocess.run([sys.argv[2], "-res-usage", f.name], capture_output=True, text=True).stdout
ins = []
for line in sass.splitlines():
    m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9.]*)\s+([^;]*);", line)
    if m:
        ins.append((int(m.group(1), 16), m.group(3), [o.strip() for o in m.group(4).split(",")]))
loops = [(a - int(t.group(1), 16), int(t.group(1), 16), a) for a, op, ops in ins if op == "BRA"
         for t in [re.search(r"0x([0-9a-f]+)", ops[0])] if t and int(t.group(1), 16) < a]
if not loops:
    sys.exit("no backward branch: no loop found")
_, start, end = max(loops)
body = [x for x in ins if start <= x[0] <= end]
ffma = hits = same_bank = 0
prev = []
reg = lambda o: (re.match(r"[-|!]*R(\d+)", o) or [None, None])[1]
for _, op, ops in body:
    srcs = ops[1:] if op.startswith("FFMA") else []
    if srcs:
        ffma += 1
        reads = []
        for k, o in enumerate(srcs):
            r = reg(o)
            if r is None:
                continue
            if k < len(prev) and prev[k].endswith(".reuse") and reg(prev[k]) == r:
                hits += 1
            else:
                reads.append(int(r) % 2)
        if reads and max(collections.Counter(reads).values()) >= 2:
            same_bank += 1
    prev = srcs
regs = re.search(r"REG:(\d+)", usage)
print(f"registers {regs.group(1) if regs else '?'}; main loop {len(body)} instructions, {ffma} FFMA "
      f"({100 * ffma / len(body):.1f} %); operands from the reuse cache {hits}; "
      f"FFMAs reading two operands from one bank {same_bank} ({100 * same_bank / max(ffma, 1):.1f} %)")
PY
