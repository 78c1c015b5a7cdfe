#!/usr/bin/env bash
# On a machine with a CUDA GPU: install swisk for its architecture, then, each phase under its own time
# limit so that a short lease still brings back every phase's log: the real-cuda tests, the benchmark,
# the real-cuda tests under compute-sanitizer's four tools (beside the rest of the suite and the value
# fuzzer on cuda, on the CPU cores).
# usage: scripts/gpu_check.sh [RESULTS_DIR]
#   SWISK_WHEEL=path   install this wheel (built elsewhere for this GPU, the checkout's Python files over
#                      its own) instead of building here
#                      (the build uses the machine's own tools: pip install --no-build-isolation)
#   SWISK_GPU_TESTS_S, SWISK_GPU_BENCH_S, SWISK_GPU_SANITIZER_S, SWISK_GPU_KERNELS_S, SWISK_GPU_PROFILE_S,
#   SWISK_GPU_NCU_S: phase limits in seconds
#   (SWISK_GPU_NCU_S: 0, the default, skips the profiler)
# A wheel for an H100/H200 built on another machine (CPython 3.12 there; abi3 serves 3.12 and later):
#   python3.12 -m pip wheel --no-build-isolation --no-deps -w .whl . -Ccmake.define.SWISK_CUDA_ARCHS=90a-real \
#     -Ccmake.define.SWISK_TESTS=ON      (with scikit-build-core and nanobind in that Python)
set -uo pipefail
cd "$(dirname "$0")/.."
results="${1:-benchmarks/results}"
mkdir -p "$results"
summary="$results/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
status=0

if [ -n "${SWISK_WHEEL:-}" ]; then
  python3 -m pip install -q --no-deps --no-index --force-reinstall "$SWISK_WHEEL" >"$results/info.txt" 2>&1 &&
    # the Python files of this checkout over the wheel's (the wheel supplies the compiled parts)
    site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') &&
    (cd python && find swisk -name '*.py' -exec cp --parents {} "$site" \;)
else
  cc=$(python3 -c "import torch; p = torch.cuda.get_device_properties(0); print(f'{p.major}{p.minor}')")
  [ "$cc" = 90 ] && cc=90a  # Hopper: the arch-specific target
  python3 -m pip install --no-build-isolation --no-deps -q -Ccmake.define.SWISK_TESTS=ON -Ccmake.define.SWISK_CUDA=ON \
    -Ccmake.define.SWISK_CUDA_ARCHS="${SWISK_CUDA_ARCHS:-${cc}-real}" . >"$results/info.txt" 2>&1
fi || { note "install failed"; tail -30 "$results/info.txt"; exit 1; }
python3 -m swisk info >>"$results/info.txt" 2>&1 || { note "swisk info failed"; cat "$results/info.txt"; exit 1; }
note "$(grep -i -E 'cuda|device' "$results/info.txt" | head -5)"

# 1. every test that runs the real cuda backend (the backend-parametrised tests, tests/test_cuda*.py)
t0=$SECONDS
timeout -k 5 "${SWISK_GPU_TESTS_S:-130}" python3 -m pytest -q -p no:cacheprovider -n 8 -k "cuda and not emu" tests \
  >"$results/pytest-cuda.log" 2>&1
rc=$?; [ "$rc" = 0 ] || status=1
note "pytest (cuda): exit $rc in $((SECONDS - t0)) s: $(tail -1 "$results/pytest-cuda.log")"

# 2. the benchmark, alone on the GPU (the JSON is rewritten after each case: a stopped run keeps its rows)
name=$(python3 -c "import torch; print(torch.cuda.get_device_name(0).replace(' ', '-'))")
t0=$SECONDS
timeout -k 5 "${SWISK_GPU_BENCH_S:-170}" python3 -m swisk bench --device cuda --no-progress \
  --json "$results/bench-$name.json" >"$results/bench-$name.txt" 2>&1
rc=$?; [ "$rc" = 0 ] || status=1
note "bench: exit $rc in $((SECONDS - t0)) s"

# 3. compute-sanitizer's four tools over the real-cuda tests, side by side (each tool one process with the
#    phase's whole limit: most of their time is the host's instrumentation, and the machine has the cores;
#    the C++ tests make no CUDA API call: the tool refuses them); the rest of the suite (cpu and the
#    emulators) and the value fuzzer on the real cuda backend (random shapes against the fp64 reference)
#    meanwhile on the remaining CPU cores
limit=${SWISK_GPU_SANITIZER_S:-200}
OMP_NUM_THREADS=1 timeout -k 5 "$limit" python3 -m pytest -q -p no:cacheprovider -n 6 \
  -k "not cuda or emu" tests >"$results/pytest-rest.log" 2>&1 &
rest=$!
OMP_NUM_THREADS=2 timeout -k 5 "$limit" python3 scripts/fuzz_values.py --backend cuda --seconds $((limit * 3 / 4)) \
  >"$results/fuzz-cuda.log" 2>&1 &
fuzz=$!
sel="cuda and not emu and not compile and not graph and not stream"
for tool in memcheck racecheck initcheck synccheck; do
  (t0=$SECONDS
   timeout -k 5 "$limit" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 0 \
     python3 -m pytest -q -p no:cacheprovider -k "$sel" tests >"$results/sanitizer-$tool.log" 2>&1
   echo "$? $((SECONDS - t0))" >"$results/sanitizer-$tool.rc") &
done
wait $rest
rest_rc=$?; [ "$rest_rc" = 0 ] || status=1
wait $fuzz
fuzz_rc=$?; [ "$fuzz_rc" = 0 ] || status=1
wait
for tool in memcheck racecheck initcheck synccheck; do
  read -r rc secs <"$results/sanitizer-$tool.rc"
  [ "$rc" = 0 ] || status=1
  log="$results/sanitizer-$tool.log"
  found=$(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)
  # every report printed (--print-limit 0: 24,550 of initcheck's took 1.6 MB gzipped): counted by kernel
  where=$(grep -h -E '^=========     at ' "$log" | sed 's/(.*//' | sort | uniq -c | sort -rn | head -6 |
    tr -s ' ' | tr '\n' ';')
  note "compute-sanitizer $tool: exit $rc in $secs s: $found $(grep -E 'passed|failed' "$log" | tail -1) ${where:+[$where]}"
done
note "pytest (cpu, emulators): exit $rest_rc: $(tail -1 "$results/pytest-rest.log")"
note "fuzz_values (cuda): exit $fuzz_rc: $(tail -1 "$results/fuzz-cuda.log")"
grep -A1 '^FAIL' "$results/fuzz-cuda.log" | head -6 >>"$summary"

# 4. Each kernel's time against a copy (scripts/gpu_kernels.py); then (SWISK_GPU_NCU_S > 0) Nsight
# Compute on the basis expansion and contraction, the FWHT and the sparse-sign passes at the bench's sizes
timeout -k 5 "${SWISK_GPU_KERNELS_S:-60}" python3 scripts/gpu_kernels.py --calls 7 >"$results/kernels.txt" 2>&1
note "kernels: exit $?"
sed 's/^/  /' "$results/kernels.txt" >>"$summary"
# 5. Where the steps that miss their goals spend their device time (scripts/gpu_profile.py: kernels by
# time, per case; 0 skips it)
if [ "${SWISK_GPU_PROFILE_S:-60}" -gt 0 ]; then
  timeout -k 5 "${SWISK_GPU_PROFILE_S:-60}" python3 scripts/gpu_profile.py >"$results/profile.txt" 2>&1
  note "profile: exit $?"
  grep '^====' "$results/profile.txt" | sed 's/^/  /' >>"$summary"
fi
if [ "${SWISK_GPU_NCU_S:-0}" -gt 0 ]; then
  timeout -k 5 "$SWISK_GPU_NCU_S" ncu --kernel-name regex:'expand|contract|fwht|sparse' --launch-skip 1 \
    --launch-count 14 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    python3 scripts/gpu_kernels.py --calls 2 >"$results/ncu.txt" 2>&1
  note "ncu: exit $? ($(grep -c 'Duration' "$results/ncu.txt") kernels read)"
fi
# The logs in one archive: the device tool brings back at most 8 files (summary, bench JSON and text,
# profile, ncu and this archive stay apart)
(cd "$results" && tar czf logs.tgz --remove-files info.txt pytest-*.log sanitizer-* fuzz-cuda.log kernels.txt \
  2>/dev/null)
exit $status
