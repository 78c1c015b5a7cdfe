#include "plan.h"

namespace swisk::metal {

std::string kernel_name(const char* family, DType d) {
  const char* s = d == DType::f32 ? "f32" : d == DType::f16 ? "f16" : d == DType::bf16 ? "bf16" : "unsupported";
  return std::string("swisk_") + family + "_" + s;
}

void submit(const Launch& launch, MetalPlan&& plan) {
  if (launch.backend == Backend::metal_emu) {
    run_emulated(plan);
  } else {
    if (!launch.plan) throw Error(ErrorKind::runtime, "[metal] plan: no plan to fill");
    *launch.plan = std::move(plan);
  }
}

}  // namespace swisk::metal
