#!/usr/bin/env bash
# Validates Kubernetes manifests (default: deploy/k8s/*.yaml) against the Kubernetes API
# schemas with kubernetes-validate (PyPI), strictly (an unknown field is an error), for the
# newest Kubernetes the package knows and for 1.30. The package goes into the git-ignored
# folder .k8s-validate/ the first time (like scripts/nvrtc-env.sh does for NVRTC).
#
#   bash scripts/k8s-validate.sh [FILE...]
#
# Exit status: 0 valid, 1 a manifest is not, 3 kubernetes-validate could not be installed
# (no network, no pip).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.k8s-validate
if [[ ! -d "$dest/kubernetes_validate" ]]; then
    # Short timeouts: without network this should end in seconds, not minutes of retries.
    if ! PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
        --timeout 10 --retries 1 --target "$dest.tmp" 'kubernetes-validate>=1.37,<1.38' >&2; then
        rm -rf "$dest.tmp"
        echo "k8s-validate: could not install kubernetes-validate from PyPI (no network?)" >&2
        exit 3
    fi
    rm -rf "$dest"
    mv "$dest.tmp" "$dest"
fi
if (($# == 0)); then
    set -- "$root"/deploy/k8s/*.yaml
fi
status=0
for version in "" 1.30; do
    PYTHONPATH=$dest python3 -m kubernetes_validate --strict --quiet ${version:+-k "$version"} "$@" || status=1
done
((status == 0)) && echo "k8s-validate: $# manifest(s) valid (strict; the newest schemas of kubernetes-validate $(PYTHONPATH=$dest python3 -m kubernetes_validate --version 2>&1 | tail -1), and 1.30)"
exit "$status"
