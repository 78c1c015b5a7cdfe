// The kernel emulator: runs dialect kernels on the CPU with a block's threads as real threads that
// meet at barriers, one block after another, with the launch geometry the GPU backends use.
#pragma once

#include <functional>

namespace swisk::emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  Dim3() = default;
  Dim3(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The calling emulated thread's coordinates (valid inside a launch).
struct ThreadCoords {
  Dim3 thread, block, block_dim, grid_dim;
};
const ThreadCoords& coords();

// Called by kernel code: all threads of the block meet here. Divergent barriers (some threads at a
// barrier, others finished) and barriers that never fill are reported as errors, never hangs.
void barrier();

// Runs `body` once per thread of every block; throws swisk::Error if a kernel thread failed.
// Launches are serialised: the static arrays standing in for shared memory belong to one block.
void launch(Dim3 grid, Dim3 block, const std::function<void()>& body);

}  // namespace swisk::emu
