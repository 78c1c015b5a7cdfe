// Metal launch plan of the sketch generation kernel (metal/sketch.metal): a grid-stride dispatch of
// SWISK_SKETCH_THREADS-thread threadgroups; slot 0 the tile, slot 1 the parameters.
#include <string>

#include "plan.h"
#include "swisk/ops/sketch.h"

namespace swisk::metal {

static void generate(const SketchMatrixArgs& a) {
  const SketchParams p = sketch_params(a);
  if (sketch_items(p) == 0) return;
  const std::string family = std::string("sketch_matrix_") + sketch_name(int(p.kind));
  submit(a.launch, make_plan(a, family.c_str(), p, sketch_grid(p), SWISK_SKETCH_THREADS, 1, {&a.out}));
}

void register_sketch(Registry& r, Backend b) {
  r.add<SketchMatrixArgs>("sketch_matrix", b, &generate, &gpu_float_only<SketchMatrixArgs>);
}

}  // namespace swisk::metal
