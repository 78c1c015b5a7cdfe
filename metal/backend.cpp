// The Metal backend (plans for Python to run on MPS) and its emulated twin, one registration per family.
#include "swisk/registry.h"

namespace swisk {
namespace metal {
void register_bspline(Registry& r, Backend b);
void register_wavelet(Registry& r, Backend b);
}

void register_metal_backend(Registry& r) {
  metal::register_bspline(r, Backend::metal);
  metal::register_wavelet(r, Backend::metal);
}
void register_metal_emu_backend(Registry& r) {
  metal::register_bspline(r, Backend::metal_emu);
  metal::register_wavelet(r, Backend::metal_emu);
}

}  // namespace swisk
