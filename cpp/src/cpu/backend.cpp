// The CPU backend: one registration per op family (the KAN kernels' of the vector width this CPU runs).
#include "clones.h"
#include "swisk/registry.h"

namespace swisk {
namespace cpu {
void register_bspline(Registry& r);
void register_wavelet(Registry& r);
void register_sketch(Registry& r);
namespace w32 {  // the KAN kernels' build: the inline namespace of its vector width (vec_math.h)
void register_kan(Registry& r);
}  // namespace w32
#ifdef SWISK_CPU_WIDE
namespace w64 {
void register_kan(Registry& r);
}  // namespace w64
#endif
}  // namespace cpu

void register_cpu_backend(Registry& r) {
  cpu::register_bspline(r);
#ifdef SWISK_CPU_WIDE
  if (cpu::kan_vector_bytes() == 64)
    cpu::w64::register_kan(r);
  else
#endif
    cpu::w32::register_kan(r);
  cpu::register_wavelet(r);
  cpu::register_sketch(r);
}

}  // namespace swisk
