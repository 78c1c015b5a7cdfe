#include "emu/emulator.h"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "swisk/error.h"

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
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (gen == gen_ && !failed_) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && gen == gen_ && !failed_) {
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

thread_local ThreadCoords tl_coords;
thread_local BlockBarrier* tl_barrier = nullptr;
std::mutex launch_mutex;

struct Abort {};  // unwinds a kernel thread once the launch has failed

}  // namespace

const ThreadCoords& coords() { return tl_coords; }

void barrier() {
  if (!tl_barrier) throw Error(ErrorKind::runtime, "[emulator] barrier: called outside a launch");
  if (!tl_barrier->arrive(false)) throw Abort{};
}

void launch(Dim3 grid, Dim3 block, const std::function<void()>& body) {
  const unsigned nthreads = block.x * block.y * block.z;
  if (nthreads == 0 || nthreads > 1024) throw Error(ErrorKind::runtime, "[emulator] block: 1..1024 threads per block");
  const unsigned long long nblocks = 1ull * grid.x * grid.y * grid.z;
  if (nblocks == 0) return;

  std::lock_guard<std::mutex> serial(launch_mutex);
  BlockBarrier bar(nthreads);
  std::vector<std::thread> threads;
  threads.reserve(nthreads);
  for (unsigned t = 0; t < nthreads; ++t) {
    threads.emplace_back([&, t] {
      tl_barrier = &bar;
      tl_coords.thread = Dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
      tl_coords.block_dim = block;
      tl_coords.grid_dim = grid;
      for (unsigned long long b = 0; b < nblocks && !bar.failed(); ++b) {
        tl_coords.block = Dim3(unsigned(b % grid.x), unsigned((b / grid.x) % grid.y), unsigned(b / (1ull * grid.x * grid.y)));
        try {
          body();
        } catch (const Abort&) {
          break;
        } catch (const std::exception& e) {
          bar.fail(std::string("kernel thread threw: ") + e.what());
          break;
        }
        if (!bar.arrive(true)) break;
      }
      tl_barrier = nullptr;
    });
  }
  for (auto& th : threads) th.join();
  if (bar.failed()) throw Error(ErrorKind::runtime, "[emulator] launch: " + bar.why());
}

}  // namespace swisk::emu
