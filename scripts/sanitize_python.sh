#!/usr/bin/env bash
# The Python suite against an ASan+UBSan build of the module _C (swisk_core and the bindings instrumented;
# torch and Python are not): every op on cpu, cuda-emu and metal-emu, with the emulators' buffer sentinels
# poisoned. Builds in build/asan-py, copies the package there with that module, runs pytest with the
# sanitizer runtimes preloaded; a report aborts the test process, which fails the run.
# usage: scripts/sanitize_python.sh [pytest arguments]   (default: the whole suite, less what cannot run so)
# env: Python_EXECUTABLE (default python3; torch, nanobind and pytest installed), JOBS (ninja -j, default 2)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${Python_EXECUTABLE:-$(command -v python3)}"
dir="$root/build/asan-py"
san="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer"

echo "== building _C with ASan+UBSan in $dir (-O1: about 25 minutes on 2 cores)"
mkdir -p "$dir"
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g -DNDEBUG" \
  -DSWISK_CUDA=OFF -DSWISK_METAL=OFF -DPython_EXECUTABLE="$py" "-DCMAKE_CXX_FLAGS=$san" \
  "-DCMAKE_SHARED_LINKER_FLAGS=$san" "-DCMAKE_MODULE_LINKER_FLAGS=$san" >"$dir/cmake.log" 2>&1 ||
  { cat "$dir/cmake.log"; exit 1; }
ninja -C "$dir" -j "${JOBS:-2}" _C
rm -rf "$dir/pkg" && mkdir -p "$dir/pkg"
cp -rL "$root/python/swisk" "$dir/pkg/"
rm -f "$dir"/pkg/swisk/_C*.so
cp "$dir"/_C*.so "$dir/generated/swisk_kernels.metal" "$dir/pkg/swisk/"

# Not under the preload: nvcc (test_sass) and the uninstrumented C++ tests (sanitize.sh covers them),
# torch.distributed's launcher (test_examples), the sanitizer builds and the docs build; the deliberate
# out-of-bounds write into a guarded Metal buffer (ASan reports it first).
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(-q -p no:cacheprovider tests --ignore=tests/test_sass.py --ignore=tests/test_cpp.py
  --ignore=tests/test_examples.py --ignore=tests/test_sanitizers.py --ignore=tests/test_docs.py
  --deselect tests/test_project.py::test_metal_emu_guards_every_bound_buffer)
cxx="${CXX:-g++}"
cd "$root"
echo "== the Python suite against it"
LD_PRELOAD="$("$cxx" -print-file-name=libasan.so):$("$cxx" -print-file-name=libubsan.so)" \
  ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  PYTHONPATH="$dir/pkg" "$py" -m pytest "${args[@]}"
echo "== the Python suite is clean under ASan+UBSan"
