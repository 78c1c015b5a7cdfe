// Built instead of cuda/ when the CUDA backend is off: it reports itself unavailable.
#include "swisk/registry.h"

namespace swisk {

void register_cuda_backend(Registry&) {}
bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
int cuda_driver_version() { return 0; }
int cuda_runtime_version() { return 0; }
std::string cuda_unusable_reason() { return "swisk was built without the CUDA backend"; }
std::string cuda_archs() { return ""; }

}  // namespace swisk
