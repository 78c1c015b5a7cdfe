#!/usr/bin/env bash
# On a machine with a CUDA GPU: build for its architecture, run the whole suite with the real cuda
# backend, the CUDA tests under compute-sanitizer, and the benchmark into benchmarks/results/.
# usage: scripts/gpu_check.sh [RESULTS_DIR]   (pip install --no-build-isolation: the machine's own tools)
set -uo pipefail
cd "$(dirname "$0")/.."
results="${1:-benchmarks/results}"
mkdir -p "$results"
cc=$(python -c "import torch; p = torch.cuda.get_device_properties(0); print(f'{p.major}{p.minor}')")
[ "$cc" = 90 ] && cc=90a  # Hopper: the arch-specific target
export SWISK_CUDA_ARCHS="${SWISK_CUDA_ARCHS:-${cc}-real}"
status=0

pip install --no-build-isolation --no-deps -q -Ccmake.define.SWISK_TESTS=ON -Ccmake.define.SWISK_CUDA=ON . || exit 1
python -m swisk info | tee "$results/info.txt"
python -m pytest -q tests 2>&1 | tee "$results/pytest.log" | tail -20
[ "${PIPESTATUS[0]}" = 0 ] || status=1

# The real-CUDA tests (backend id "cuda", not the emulator) under each compute-sanitizer tool.
for tool in memcheck racecheck initcheck synccheck; do
  compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
    python -m pytest -q -x -p no:cacheprovider -k "cuda and not emu and not compile" tests \
    > "$results/sanitizer-$tool.log" 2>&1
  rc=$?
  echo "compute-sanitizer $tool: exit $rc ($(grep -c 'ERROR SUMMARY: 0 errors' "$results/sanitizer-$tool.log") clean summaries)"
  [ "$rc" = 0 ] || status=1
done

name=$(python -c "import torch; print(torch.cuda.get_device_name(0).replace(' ', '-'))")
python -m swisk bench --device cuda --no-progress --json "$results/bench-$name.json" | tee "$results/bench-$name.txt"
exit $status
