// Parallel loops of the CPU backend. They run on the OpenMP runtime already in the process (torch's
// libgomp, found at first use: parallel.cpp), through its GOMP_parallel entry point, so that swisk
// and torch share one thread team and one thread count (torch.set_num_threads) and the module needs
// no OpenMP library of its own. Plain threads under TSan; serially when no runtime is found.
#pragma once

#include <cstdint>
#include <type_traits>

#if defined(SWISK_SANITIZE_THREAD)
#include <thread>
#include <vector>
#endif

namespace swisk::cpu {

// Entry points of a GOMP-compatible runtime (libgomp, or LLVM/Intel OpenMP's GOMP layer).
struct OpenMP {
  void (*parallel)(void (*)(void*), void*, unsigned, unsigned) = nullptr;  // GOMP_parallel
  int (*in_parallel)() = nullptr;
  int (*max_threads)() = nullptr;
  int (*thread_num)() = nullptr;
  int (*num_threads)() = nullptr;
  const char* name = "";  // the library's file name, "" when none was found
};
const OpenMP& openmp();

// Threads a parallel_for would use now (1 without a runtime).
int max_threads();

// f(begin, end) over [0, n) in chunks of at least `grain` items, chunks split evenly over the threads.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  const int64_t chunks = (n + grain - 1) / grain;
  struct Job {
    std::remove_reference_t<F>* f;
    int64_t n, grain, chunks;
    void run(int64_t t, int64_t nt) const {
      for (int64_t c = chunks * t / nt; c < chunks * (t + 1) / nt; ++c)
        (*f)(c * grain, c * grain + grain < n ? c * grain + grain : n);
    }
  } job{&f, n, grain, chunks};
#if defined(SWISK_SANITIZE_THREAD)
  // ThreadSanitizer cannot see an OpenMP runtime's synchronisation: the same chunks on plain threads.
  const int64_t nt = chunks < 4 ? chunks : 4;
  if (nt > 1) {
    std::vector<std::thread> ts;
    for (int64_t t = 0; t < nt; ++t) ts.emplace_back([&, t] { job.run(t, nt); });
    for (auto& th : ts) th.join();
    return;
  }
#else
  const OpenMP& omp = openmp();
  if (chunks > 1 && omp.parallel && !omp.in_parallel()) {
    omp.parallel([](void* p) {
      const OpenMP& o = openmp();
      static_cast<const Job*>(p)->run(o.thread_num(), o.num_threads());
    }, &job, 0, 0);
    return;
  }
#endif
  job.run(0, 1);
}

}  // namespace swisk::cpu
