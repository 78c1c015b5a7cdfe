// Metal launch plans of the sketch kernels (metal/sketch.metal): the generation kernel (a grid-stride
// dispatch of SWISK_SKETCH_THREADS-thread threadgroups; slot 0 the tile, slot 1 the parameters), the
// sparse-sign passes, the FWHT and the SRHT.
#include <string>
#include <vector>

#include "plan.h"
#include "swisk/ops/sketch.h"

namespace swisk::metal {

static void generate(const SketchMatrixArgs& a) {
  const SketchParams p = sketch_params(a);  // every term, in one dispatch (the grid's y)
  if (sketch_items(p) == 0) return;
  const std::string family = std::string("sketch_matrix_") + sketch_name(int(p.kind));
  submit(a.launch, make_plan(a, family.c_str(), p, sketch_grid(p), SWISK_SKETCH_THREADS, 1, {&a.out}));
}

// The chunk pass (slots: x, out, parameters), then one dispatch per register pass (out, parameters); the
// kernels of dtype d (a's x's, or the fp32 workspace's).
template <class Args>
static void plan_fwht(const Args& a, const std::vector<FwhtParams>& passes, const TensorView* x, const TensorView* out,
                      DType d) {
  MetalDispatch first = make_plan(a, "fwht_shared", passes[0], fwht_shared_grid(passes[0]), fwht_chunk_threads(passes[0]), 1,
                                  {x, out});
  first.kernel = kernel_name("fwht_shared", d);
  submit(a.launch, std::move(first));
  for (size_t s = 1; s < passes.size(); ++s) {
    MetalDispatch st = make_plan(a, "fwht_stage", passes[s], fwht_stage_grid(passes[s]), SWISK_FWHT_THREADS, 1, {out});
    st.kernel = kernel_name("fwht_stage", d);
    submit(a.launch, std::move(st));
  }
}

static void fwht(const FwhtArgs& a) {
  const int64_t n = a.x.size(-1);
  const std::vector<FwhtParams> passes = fwht_passes(a.x.numel() / n, n, a.scale, SWISK_FWHT_METAL_CHUNK_LOG2);
  if (fwht_units(passes[0]) == 0) return;
  plan_fwht(a, passes, &a.x, &a.out, a.x.dtype);
}

// Tables: into work (slots work, parameters); then per pass of at most p.cap rows, in: x -> work (x, work,
// parameters); the FWHT on work (fp32); out: work -> out (work, out, parameters).
static void srht(const SrhtArgs& a) {
  const SrhtParams p = srht_params(a);
  if (p.rows == 0) return;
  submit(a.launch, make_plan(a, "srht_tables", p, srht_grid(srht_table_items(p)), SWISK_FWHT_THREADS, 1, {&a.work}));
  for (sk_u64 r0 = 0; r0 < p.rows; r0 += p.cap) {  // 64-bit: rows near 2^32 must not wrap
    const SrhtParams q = srht_pass(p, r0);
    submit(a.launch, make_plan(a, a.transpose ? "srht_t_in" : "srht_in", q, srht_in_grid(q), SWISK_FWHT_THREADS, 1,
                               {&a.x, &a.work}));
    plan_fwht(a, fwht_passes(q.rows, q.big_n, 1.0, SWISK_FWHT_METAL_CHUNK_LOG2), &a.work, &a.work, DType::f32);
    submit(a.launch, make_plan(a, a.transpose ? "srht_t_out" : "srht_out", q, srht_out_grid(q), SWISK_FWHT_THREADS,
                               1, {&a.work, &a.out}));
  }
}

// Sparse-sign (sketch_sparse.h): the table passes on work (slots work, parameters), then the product
// (x, work, out, parameters).
static void sparse_sketch(const SketchArgs& a) {
  const SparseParams p = sparse_sketch_params(a);
  if (p.rows == 0) return;
  if (a.transpose) {
    submit(a.launch, make_plan(a, "sparse_table", p, sparse_grid(p.s.n, SWISK_SKETCH_THREADS), SWISK_SKETCH_THREADS, 1,
                               {&a.work}));
  } else {
    submit(a.launch, make_plan(a, "sparse_sort", p, sparse_sort_grid(p), SWISK_SPARSE_THREADS, 1, {&a.work}));
  }
  const SkGrid outs = sparse_apply_grid(p, a.transpose);
  submit(a.launch, make_plan(a, a.transpose ? "sparse_apply_t" : "sparse_apply", p, outs, SWISK_SPARSE_THREADS, 1,
                             {&a.x, &a.work, &a.out}));
  if (!a.transpose && p.splits > 1)
    submit(a.launch, make_plan(a, "sparse_sum", p, sparse_sum_grid(p), SWISK_SPARSE_THREADS, 1, {&a.work, &a.out}));
}

void register_sketch(Registry& r, Backend b) {
  r.add<SketchArgs>("sketch", b, &sparse_sketch, &gpu_float_only<SketchArgs>);
  r.add<SketchArgs>("sketch_transpose", b, &sparse_sketch, &gpu_float_only<SketchArgs>);
  r.add<FwhtArgs>("fwht", b, &fwht, &gpu_float_only<FwhtArgs>);
  r.add<SrhtArgs>("srht", b, &srht, &gpu_float_only<SrhtArgs>);
  r.add<SrhtArgs>("srht_transpose", b, &srht, &gpu_float_only<SrhtArgs>);
  r.add<SketchMatrixArgs>("sketch_matrix", b, &generate, &gpu_float_only<SketchMatrixArgs>);
}

}  // namespace swisk::metal
