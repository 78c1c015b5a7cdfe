// The CPU backend: one registration per op family.
#include "swisk/registry.h"

namespace swisk {
namespace cpu {
void register_bspline(Registry& r);
void register_kan(Registry& r);
void register_wavelet(Registry& r);
void register_sketch(Registry& r);
}

void register_cpu_backend(Registry& r) {
  cpu::register_bspline(r);
  cpu::register_kan(r);
  cpu::register_wavelet(r);
  cpu::register_sketch(r);
}

}  // namespace swisk
