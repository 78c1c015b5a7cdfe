// The kernel emulator: runs dialect kernels on the CPU with a block's threads as real threads that
// meet at barriers, one block after another, with the launch geometry the GPU backends use.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace swisk::emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  Dim3() = default;
  Dim3(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The hardware limits of the emulated GPU: a launch that a real one would refuse fails here too.
struct Target {
  const char* name;
  unsigned long long max_grid[3];  // blocks per grid dimension
  unsigned max_block[3];           // threads per block dimension
  unsigned max_threads;            // threads per block
  std::size_t max_shared_bytes;    // static shared (threadgroup) memory per block
  std::size_t max_dynamic_bytes;   // static and dynamic together, the kernel opting in (CUDA)
  unsigned warp_size;              // warp / simdgroup width
  static const Target cuda_sm90, apple;
};
// CUDA sm_90's limits (static __shared__ is capped at 48 KiB; 227 KiB with dynamic shared memory).
inline constexpr Target Target::cuda_sm90 = {
    "CUDA sm_80/sm_90", {2147483647ull, 65535, 65535}, {1024, 1024, 64}, 1024, 48 * 1024, 227 * 1024, 32};
// Apple GPUs (Metal 3): 1024 threads per threadgroup, 32 KiB of threadgroup memory.
inline constexpr Target Target::apple = {
    "Apple GPU", {4294967295ull, 4294967295ull, 4294967295ull}, {1024, 1024, 1024}, 1024, 32 * 1024, 32 * 1024, 32};

// The calling emulated thread's coordinates (valid inside a launch).
struct ThreadCoords {
  Dim3 thread, block, block_dim, grid_dim;
};
const ThreadCoords& coords();

// Called by kernel code: all threads of the block meet here. Divergent barriers (some threads at a
// barrier, others finished) and barriers that never fill are reported as errors, never hangs.
void barrier();

// Runs `body` once per thread of every block; throws swisk::Error if the geometry exceeds the
// target's limits or a kernel thread failed. Launches are serialised: the static arrays standing in
// for shared memory belong to one block. dynamic_bytes: the dynamic shared memory the launch gives.
void launch(Dim3 grid, Dim3 block, const std::function<void()>& body, const Target& target = Target::cuda_sm90,
            std::size_t dynamic_bytes = 0);

// Called by every thread that reaches a shared-array declaration: counts the array against the
// target's shared-memory limit (failing the launch when over) and, first in each block, fills it
// with 0xFF bytes (NaN for floats) so reading what this block did not write shows. No-op outside a launch.
void shared_array(void* p, std::size_t bytes);

// The same for the kernel's dynamic array: its bytes must fit in what the launch gave.
void dynamic_shared_array(void* p, std::size_t bytes);

// A shared array for the shims' SWISK_SHARED: one static array per kernel, registered per block.
#define SWISK_EMU_SHARED(T, name, n, align) \
  alignas(align) static T name[n];          \
  ::swisk::emu::shared_array((void*)(name), sizeof(name))
#define SWISK_EMU_SHARED_DYNAMIC(T, name, n) \
  alignas(16) static T name[n];              \
  ::swisk::emu::dynamic_shared_array((void*)(name), sizeof(name))

// Buffer sentinels (ggml's test-backend-ops idea): while `body` runs, each *ptr points at a copy of
// its `bytes` with 4 KiB of a known pattern on either side; afterwards the results are copied back,
// *ptr restored (also on throw) and a changed sentinel throws swisk::Error ("buffer i: write out of
// bounds before/after"). Entries with the same pointer share one copy (in-place kernels still alias);
// null pointers stay null; partially overlapping buffers are not supported. Under AddressSanitizer the
// sentinels are poisoned while body runs: a read or write there is ASan's report, at the access.
#if defined(__SANITIZE_ADDRESS__)
#define SWISK_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SWISK_EMU_ASAN 1
#endif
#endif
#ifndef SWISK_EMU_ASAN
#define SWISK_EMU_ASAN 0
#endif
struct GuardedBuffer {
  void** ptr;
  std::size_t bytes;
};
void with_guarded_buffers(std::vector<GuardedBuffer> bufs, const std::function<void()>& body);

}  // namespace swisk::emu
