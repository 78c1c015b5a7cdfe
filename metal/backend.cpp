// The Metal backend (plans for Python to run on MPS) and its emulated twin, one registration per family.
#include "swisk/registry.h"

namespace swisk {
namespace metal {
void register_bspline(Registry& r, Backend b);
void register_kan(Registry& r, Backend b);
void register_wavelet(Registry& r, Backend b);
void register_sketch(Registry& r, Backend b);

static void register_all(Registry& r, Backend b) {
  register_bspline(r, b);
  register_kan(r, b);
  register_wavelet(r, b);
  register_sketch(r, b);
}
}  // namespace metal

void register_metal_backend(Registry& r) { metal::register_all(r, Backend::metal); }
void register_metal_emu_backend(Registry& r) { metal::register_all(r, Backend::metal_emu); }

}  // namespace swisk
