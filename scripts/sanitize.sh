#!/usr/bin/env bash
# Builds the C++ tests with ASan+UBSan (build/asan) and with TSan (build/tsan), CUDA off, and runs
# the whole test binary under each; any sanitizer report stops the run and fails the script.
# usage: scripts/sanitize.sh [address|thread ...]   (default: both)   env: JOBS (ninja -j, default 2)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(address thread)
py="${Python_EXECUTABLE:-$(command -v python3)}"

export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

for kind in "${kinds[@]}"; do
  case "$kind" in
    address) dir="$root/build/asan" ;;
    thread) dir="$root/build/tsan" ;;
    *) echo "sanitize.sh: unknown sanitizer '$kind' (address or thread)" >&2; exit 2 ;;
  esac
  echo "== $kind: building in $dir"
  mkdir -p "$dir"
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSWISK_SANITIZE="$kind" -DSWISK_CUDA=OFF \
    -DSWISK_METAL=OFF -DSWISK_TESTS=ON -DPython_EXECUTABLE="$py" >"$dir/cmake.log" 2>&1 ||
    { cat "$dir/cmake.log"; exit 1; }
  ninja -C "$dir" -j "${JOBS:-2}" swisk_cpp_tests
  echo "== $kind: running the C++ tests"
  # No argument runs every test; a sanitizer report aborts with a non-zero status.
  "$dir/swisk_cpp_tests"
done
echo "== sanitizers clean: ${kinds[*]}"
