#include "emu/emulator.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "swisk/error.h"

#if SWISK_EMU_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace swisk::emu {
namespace {

// A reusable barrier that knows why each thread arrived (a barrier call, or the end of its block).
class BlockBarrier {
 public:
  explicit BlockBarrier(unsigned n) : n_(n) {}

  // Returns false once the launch has failed; the caller then stops.
  bool arrive(bool at_exit) {
    std::unique_lock<std::mutex> lock(m_);
    if (failed_) return false;
    if (count_ == 0) phase_exit_ = at_exit;
    if (phase_exit_ != at_exit) {
      fail_locked("barrier divergence: some threads of a block reached a barrier while others finished");
      return false;
    }
    unsigned gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return true;
    }
    // Stuck: no thread of the block arrived for 60 s, and none in a further 10 s after that wait ran
    // out (a process stopped for minutes, e.g. by SIGSTOP, runs out every deadline at once on waking).
    using clock = std::chrono::steady_clock;
    auto deadline = clock::now() + std::chrono::seconds(60);
    unsigned seen = count_;
    bool grace = false;
    while (gen == gen_ && !failed_) {
      if (cv_.wait_until(lock, deadline) != std::cv_status::timeout || gen != gen_ || failed_) continue;
      if (count_ != seen || !grace) {
        grace = count_ == seen;
        seen = count_;
        deadline = clock::now() + std::chrono::seconds(grace ? 10 : 60);
      } else {
        fail_locked("barrier never filled (a thread is stuck or skipped it)");
      }
    }
    return !failed_;
  }

  void fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(m_);
    fail_locked(why);
  }
  // Read under the lock: other threads set failed_ while this one is between barriers.
  bool failed() {
    std::lock_guard<std::mutex> lock(m_);
    return failed_;
  }
  const std::string& why() const { return why_; }  // only after the threads have joined

 private:
  void fail_locked(const std::string& why) {
    if (!failed_) why_ = why;
    failed_ = true;
    cv_.notify_all();
  }
  std::mutex m_;
  std::condition_variable cv_;
  unsigned n_, count_ = 0, gen_ = 0;
  bool phase_exit_ = false, failed_ = false;
  std::string why_;
};

// The shared arrays a launch has met: their bytes add up against the target's limit.
struct SharedArrays {
  struct Entry {
    void* p;
    std::size_t bytes;
    unsigned long long poisoned;  // 1 + the last block that poisoned it, 0 for none
  };
  std::mutex m;
  std::vector<Entry> entries;
  std::size_t total = 0;
};

struct LaunchState {
  const Target& target;
  BlockBarrier bar;
  SharedArrays shared;
  std::size_t dynamic_bytes;
};

thread_local ThreadCoords tl_coords;
thread_local LaunchState* tl_launch = nullptr;
thread_local unsigned long long tl_block = 0;  // linear index of the current block
std::mutex launch_mutex;

struct Abort {};  // unwinds a kernel thread once the launch has failed

[[noreturn]] void geometry_error(const char* what, const char* dim, unsigned long long v, unsigned long long max,
                                 const Target& t) {
  throw Error(ErrorKind::runtime, detail::cat("[emulator] ", what, ": ", dim, " = ", v, " exceeds the limit of ",
                                              max, " on ", t.name));
}

void check_geometry(Dim3 grid, Dim3 block, const Target& t) {
  const unsigned g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
  const char* gn[3] = {"gridDim.x", "gridDim.y", "gridDim.z"};
  const char* bn[3] = {"blockDim.x", "blockDim.y", "blockDim.z"};
  for (int d = 0; d < 3; ++d) {
    if (g[d] == 0 || b[d] == 0)
      throw Error(ErrorKind::runtime, detail::cat("[emulator] launch: ", g[d] == 0 ? gn[d] : bn[d],
                                                  " = 0 (an empty launch is an invalid configuration on a GPU)"));
    if (g[d] > t.max_grid[d]) geometry_error("grid", gn[d], g[d], t.max_grid[d], t);
    if (b[d] > t.max_block[d]) geometry_error("block", bn[d], b[d], t.max_block[d], t);
  }
  const unsigned long long n = 1ull * block.x * block.y * block.z;
  if (n > t.max_threads) geometry_error("block", "threads per block", n, t.max_threads, t);
}

}  // namespace

const ThreadCoords& coords() { return tl_coords; }

void barrier() {
  if (!tl_launch) throw Error(ErrorKind::runtime, "[emulator] barrier: called outside a launch");
  if (!tl_launch->bar.arrive(false)) throw Abort{};
}

namespace {
// Registers (once per launch) and poisons (once per block) a shared array; `dynamic`: the kernel's
// dynamic array, which must fit in the launch's dynamic bytes and counts against the opt-in limit.
void register_shared(void* p, std::size_t bytes, bool dynamic) {
  LaunchState* L = tl_launch;
  if (!L) return;
  SharedArrays& s = L->shared;
  std::unique_lock<std::mutex> lock(s.m);
  SharedArrays::Entry* e = nullptr;
  for (auto& x : s.entries)
    if (x.p == p) e = &x;
  if (!e) {
    std::string why;
    const std::size_t total = s.total + (dynamic ? 0 : bytes);
    if (dynamic && bytes > L->dynamic_bytes)
      why = detail::cat("dynamic shared memory: the kernel uses ", bytes, " bytes, the launch gives ", L->dynamic_bytes);
    else if (total > L->target.max_shared_bytes)
      why = detail::cat("shared memory: ", total, " bytes per block exceed the limit of ", L->target.max_shared_bytes,
                        " on ", L->target.name);
    else if (total + L->dynamic_bytes > L->target.max_dynamic_bytes)
      why = detail::cat("shared memory: ", total, " static and ", L->dynamic_bytes, " dynamic bytes per block exceed the ",
                        "limit of ", L->target.max_dynamic_bytes, " on ", L->target.name);
    if (!why.empty()) {
      lock.unlock();
      L->bar.fail(why);
      throw Abort{};
    }
    s.total = total;
    s.entries.push_back({p, bytes, 0});
    e = &s.entries.back();
  }
  if (e->poisoned != tl_block + 1) {
    std::memset(p, 0xFF, bytes);
    e->poisoned = tl_block + 1;
  }
}
}  // namespace

void shared_array(void* p, std::size_t bytes) { register_shared(p, bytes, false); }
void dynamic_shared_array(void* p, std::size_t bytes) { register_shared(p, bytes, true); }

void launch(Dim3 grid, Dim3 block, const std::function<void()>& body, const Target& target, std::size_t dynamic_bytes) {
  check_geometry(grid, block, target);
  if (dynamic_bytes > target.max_dynamic_bytes)
    throw Error(ErrorKind::runtime, detail::cat("[emulator] launch: ", dynamic_bytes,
                                                " bytes of dynamic shared memory exceed the limit of ",
                                                target.max_dynamic_bytes, " on ", target.name));
  const unsigned nthreads = block.x * block.y * block.z;
  const unsigned long long nblocks = 1ull * grid.x * grid.y * grid.z;

  std::lock_guard<std::mutex> serial(launch_mutex);
  LaunchState state{target, BlockBarrier(nthreads), {}, dynamic_bytes};
  std::vector<std::thread> threads;
  threads.reserve(nthreads);
  for (unsigned t = 0; t < nthreads; ++t) {
    threads.emplace_back([&, t] {
      tl_launch = &state;
      tl_coords.thread = Dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
      tl_coords.block_dim = block;
      tl_coords.grid_dim = grid;
      for (unsigned long long b = 0; b < nblocks && !state.bar.failed(); ++b) {
        tl_block = b;
        tl_coords.block = Dim3(unsigned(b % grid.x), unsigned((b / grid.x) % grid.y), unsigned(b / (1ull * grid.x * grid.y)));
        try {
          body();
        } catch (const Abort&) {
          break;
        } catch (const std::exception& e) {
          state.bar.fail(std::string("kernel thread threw: ") + e.what());
          break;
        }
        if (!state.bar.arrive(true)) break;
      }
      tl_launch = nullptr;
    });
  }
  for (auto& th : threads) th.join();
  if (state.bar.failed()) throw Error(ErrorKind::runtime, "[emulator] launch: " + state.bar.why());
}

namespace {

constexpr std::size_t kGuard = 4096;
constexpr unsigned char sentinel(std::size_t i) { return (i & 3) == 0 ? 0x55 : (i & 3) == 1 ? 0xDA : (i & 3) == 2 ? 0xBA : 0x7F; }

// One guarded copy: [kGuard sentinel bytes][the buffer][kGuard sentinel bytes], 64-byte aligned.
struct GuardedCopy {
  void* orig;
  std::size_t bytes;
  std::vector<unsigned char> mem;  // over-allocated for the alignment
  unsigned char* base = nullptr;
  unsigned char* data() const { return base + kGuard; }
  void poison(bool on) const {  // the sentinels, for AddressSanitizer (nothing without it)
#if SWISK_EMU_ASAN
    if (on) {
      ASAN_POISON_MEMORY_REGION(base, kGuard);
      ASAN_POISON_MEMORY_REGION(data() + bytes, kGuard);
    } else {
      ASAN_UNPOISON_MEMORY_REGION(base, bytes + 2 * kGuard);
    }
#else
    (void)on;
#endif
  }
  const char* damaged() const {  // "before", "after" or nullptr
    for (std::size_t i = 0; i < kGuard; ++i)
      if (base[i] != sentinel(i)) return "before";
    for (std::size_t i = 0; i < kGuard; ++i)
      if (data()[bytes + i] != sentinel(i)) return "after";
    return nullptr;
  }
};

}  // namespace

void with_guarded_buffers(std::vector<GuardedBuffer> bufs, const std::function<void()>& body) {
  constexpr std::size_t none = ~std::size_t(0);
  std::vector<GuardedCopy> copies;              // one per distinct pointer, as large as its largest use
  std::vector<std::size_t> copy_of(bufs.size(), none);  // null pointers stay null (absent buffers)
  for (std::size_t i = 0; i < bufs.size(); ++i) {
    void* orig = *bufs[i].ptr;
    if (!orig) continue;
    std::size_t c = 0;
    while (c < copies.size() && copies[c].orig != orig) ++c;
    if (c == copies.size()) copies.push_back({orig, 0, {}});
    copies[c].bytes = std::max(copies[c].bytes, bufs[i].bytes);
    copy_of[i] = c;
  }
  for (GuardedCopy& g : copies) {
    g.mem.resize(g.bytes + 2 * kGuard + 64);
    g.base = g.mem.data() + (64 - reinterpret_cast<std::uintptr_t>(g.mem.data()) % 64) % 64;
    for (std::size_t k = 0; k < kGuard; ++k) g.base[k] = g.data()[g.bytes + k] = sentinel(k);
    if (g.bytes) std::memcpy(g.data(), g.orig, g.bytes);
  }
  for (std::size_t i = 0; i < bufs.size(); ++i)
    if (copy_of[i] != none) *bufs[i].ptr = copies[copy_of[i]].data();
  for (const GuardedCopy& g : copies) g.poison(true);
  std::exception_ptr thrown;
  try {
    body();
  } catch (...) {
    thrown = std::current_exception();
  }
  for (const GuardedCopy& g : copies) g.poison(false);
  for (std::size_t i = 0; i < bufs.size(); ++i)
    if (copy_of[i] != none) *bufs[i].ptr = copies[copy_of[i]].orig;
  std::string damage;
  for (std::size_t c = 0; c < copies.size(); ++c) {
    const GuardedCopy& g = copies[c];
    if (const char* where = g.damaged(); where && damage.empty()) {
      std::size_t i = 0;
      while (copy_of[i] != c) ++i;
      damage = detail::cat("[emulator] buffer ", i, ": write out of bounds ", where);
    }
    if (g.bytes) std::memcpy(g.orig, g.data(), g.bytes);
  }
  if (!damage.empty()) throw Error(ErrorKind::runtime, damage);
  if (thrown) std::rethrow_exception(thrown);
}

}  // namespace swisk::emu
