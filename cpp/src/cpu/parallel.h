// Parallel loops of the CPU backend (OpenMP when built with it, else serial).
#pragma once

#include <cstdint>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace swisk::cpu {

// f(begin, end) over [0, n) in chunks of at least `grain` items.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
#if defined(_OPENMP)
  const int64_t chunks = (n + grain - 1) / grain;
  if (chunks > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) f(c * grain, c * grain + grain < n ? c * grain + grain : n);
    return;
  }
#endif
  f(int64_t(0), n);
}

}  // namespace swisk::cpu
