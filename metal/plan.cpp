#include "plan.h"

namespace swisk::metal {

std::string kernel_name(const char* family, DType d) {
  const char* s = d == DType::f32 ? "f32" : d == DType::f16 ? "f16" : d == DType::bf16 ? "bf16" : "unsupported";
  return std::string("swisk_") + family + "_" + s;
}

void submit(const Launch& launch, MetalDispatch&& d) {
  if (!launch.dispatches) throw Error(ErrorKind::runtime, "[metal] dispatch: no dispatch list to fill");
  launch.dispatches->push_back(std::move(d));
}

}  // namespace swisk::metal
