// Parallel loops of the CPU backend (OpenMP when built with it, plain threads under TSan, else serial).
#pragma once

#include <cstdint>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(SWISK_SANITIZE_THREAD)
#include <thread>
#include <vector>
#endif

namespace swisk::cpu {

// f(begin, end) over [0, n) in chunks of at least `grain` items.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
#if defined(SWISK_SANITIZE_THREAD)
  // ThreadSanitizer cannot see libgomp's synchronisation: the same chunks on plain threads, 4 at most.
  const int64_t chunks = (n + grain - 1) / grain, nt = chunks < 4 ? chunks : 4;
  if (nt > 1) {
    std::vector<std::thread> ts;
    for (int64_t t = 0; t < nt; ++t)
      ts.emplace_back([&, t] {
        for (int64_t c = chunks * t / nt; c < chunks * (t + 1) / nt; ++c) f(c * grain, c * grain + grain < n ? c * grain + grain : n);
      });
    for (auto& th : ts) th.join();
    return;
  }
#elif defined(_OPENMP)
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
