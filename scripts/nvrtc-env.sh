#!/usr/bin/env bash
# Installs NVRTC (PyPI wheel `nvidia-cuda-nvrtc`, CUDA 13.0) into the git-ignored folder .nvrtc/
# and prints the directory that holds libnvrtc.so.13, for LD_LIBRARY_PATH.
# Idempotent: a second call only prints the directory. Needs python3 with pip (no GPU, no CUDA).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.nvrtc"
libdir="$dest/nvidia/cu13/lib"
if ! ls "$libdir"/libnvrtc.so.13* >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" \
    'nvidia-cuda-nvrtc>=13.0,<13.1' >&2
fi
ls "$libdir"/libnvrtc.so.13* >/dev/null 2>&1 || { echo "NVRTC install failed: no libnvrtc.so.13 under $libdir" >&2; exit 1; }
echo "$libdir"
