// Metal launch plan of the sketch generation kernel (metal/sketch.metal): a grid-stride dispatch of
// SWISK_SKETCH_THREADS-thread threadgroups; slot 0 the tile, slot 1 the parameters.
#include <string>
#include <vector>

#include "plan.h"
#include "swisk/ops/sketch.h"

namespace swisk::metal {

static void generate(const SketchMatrixArgs& a) {
  const SketchParams p = sketch_params(a);
  if (sketch_items(p) == 0) return;
  const std::string family = std::string("sketch_matrix_") + sketch_name(int(p.kind));
  submit(a.launch, make_plan(a, family.c_str(), p, sketch_grid(p), SWISK_SKETCH_THREADS, 1, {&a.out}));
}

// The shared pass (slots: x, out, parameters), then one dispatch per global stage (out, parameters).
static void fwht(const FwhtArgs& a) {
  const std::vector<FwhtParams> passes = fwht_passes(a);
  if (fwht_chunks(passes[0]) == 0) return;
  submit(a.launch, make_plan(a, "fwht_shared", passes[0], fwht_shared_grid(passes[0]), SWISK_FWHT_THREADS, 1,
                             {&a.x, &a.out}));
  for (size_t s = 1; s < passes.size(); ++s)
    submit(a.launch, make_plan(a, "fwht_stage", passes[s], fwht_stage_grid(passes[s]), SWISK_FWHT_THREADS, 1,
                               {&a.out}));
}

void register_sketch(Registry& r, Backend b) {
  r.add<FwhtArgs>("fwht", b, &fwht, &gpu_float_only<FwhtArgs>);
  r.add<SketchMatrixArgs>("sketch_matrix", b, &generate, &gpu_float_only<SketchMatrixArgs>);
}

}  // namespace swisk::metal
