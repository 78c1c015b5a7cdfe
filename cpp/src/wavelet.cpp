// Frontends of the wavelet KAN ops: validate once (prepare), then launch.
#include "swisk/ops/wavelet.h"

#include "dtype_dispatch.h"
#include "validate.h"

namespace swisk {

#define SK_WAV_NAME(id, name) #name,
static constexpr const char* kWaveletNames[] = {SWISK_WAVELETS(SK_WAV_NAME)};
#undef SK_WAV_NAME

static constexpr bool same_name(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
#define SK_WAV_IN_ORDER(id, name) \
  static_assert(same_name(kWaveletNames[id], #name), "SWISK_WAVELETS: ids must be 0, 1, ... in order");
SWISK_WAVELETS(SK_WAV_IN_ORDER)
#undef SK_WAV_IN_ORDER

const char* wavelet_name(int id) { return kWaveletNames[id]; }

const char* wavelet_names() {
  static const std::string all = [] {
    std::string s;
    for (const char* n : kWaveletNames) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
  }();
  return all.c_str();
}

int wavelet_id(const char* op, const std::string& name) {
  for (int k = 0; k < SWISK_NUM_WAVELETS; ++k)
    if (name == kWaveletNames[k]) return k;
  fail(ErrorKind::value, op, "wavelet", "unknown wavelet '", name, "'; valid: ", wavelet_names());
}

static void check_common(const char* op, const TensorView& x, const TensorView& scale, const TensorView& translation,
                         const TensorView& weight, const std::string& wavelet, Backend b) {
  wavelet_id(op, wavelet);
  check_float(op, "x", x);
  check_min_ndim(op, "x", x, 1, "(..., in)");
  check_backend(op, "x", x, b);
  check_ndim(op, "weight", weight, 2, "(out, in)");
  SWISK_CHECK(weight.shape[1] == x.size(-1), value, op, "weight", "must be (out, in) with in = x.shape[-1] = ",
              x.size(-1), ", got ", weight.shape_str());
  const std::vector<int64_t> pshape{weight.shape[0], weight.shape[1]};
  for (auto [name, t] : {std::pair{"scale", &scale}, std::pair{"translation", &translation},
                         std::pair{"weight", &weight}}) {
    check_same_dtype(op, name, *t, x, "x");
    check_same_device(op, name, *t, x, "x");
    check_shape(op, name, *t, pshape);
  }
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.shape[d];
  SWISK_CHECK(rows < (int64_t(1) << 32) && x.numel() < (int64_t(1) << 32) && weight.numel() < (int64_t(1) << 32),
              value, op, "x", "at most 2^32 rows and elements per tensor are supported");
}

// Contiguous, unless empty (whose strides say nothing).
static void check_dense(const char* op, const char* arg, const TensorView& t) {
  if (t.numel() > 0) check_contiguous(op, arg, t);
}

// A zero scale divides by zero; host memory is checked here (GPUs give the inf / NaN the math gives).
static void check_scale(const char* op, const TensorView& scale, Backend b) {
  check_dense(op, "scale", scale);
  if (!host_readable(b)) return;
  dispatch_float<true>(scale.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const T* s = scale.ptr<const T>();
    const int64_t n = scale.numel(), in = scale.shape[1];
    for (int64_t e = 0; e < n; ++e)
      SWISK_CHECK(float_of(s[e]) != 0, value, op, "scale", "must be non-zero; scale[", e / in, ", ", e % in,
                  "] is 0");
  });
}

WaveletParams wavelet_params(const TensorView& x, const TensorView& weight, const std::string& wavelet) {
  WaveletParams p;
  p.in = sk_u32(weight.shape[1]);
  p.out = sk_u32(weight.shape[0]);
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.shape[d];
  p.rows = sk_u32(rows);
  p.wavelet = sk_u32(wavelet_id("wavelet_kan", wavelet));
  return p;
}

template <class Args>
static void check_scale_values(const Args& a) {
  check_scale("wavelet_kan", a.scale, a.launch.backend);
}

static std::vector<int64_t> wavelet_shape(const char* op, const TensorView& x, const TensorView& scale,
                                          const TensorView& translation, const TensorView& weight,
                                          const std::string& wavelet, Backend b) {
  check_common(op, x, scale, translation, weight, wavelet, b);
  for (auto [name, t] : {std::pair{"x", &x}, std::pair{"scale", &scale}, std::pair{"translation", &translation},
                         std::pair{"weight", &weight}})
    check_dense(op, name, *t);
  std::vector<int64_t> shape(x.shape, x.shape + x.ndim);
  shape.back() = weight.shape[0];
  return shape;
}

std::unique_ptr<PreparedCall> wavelet_kan_prepare(const WaveletKanArgs& a, Backend b) {
  auto shape = wavelet_shape("wavelet_kan", a.x, a.scale, a.translation, a.weight, a.wavelet, b);
  auto c = make_call("wavelet_kan", a, b, &check_scale_values<WaveletKanArgs>);
  c->outputs = {shape};
  c->zero_outputs = {uint8_t(a.weight.shape[1] == 0)};  // no features: y = 0
  return c;
}

std::unique_ptr<PreparedCall> wavelet_kan_backward_prepare(const WaveletKanBackwardArgs& a, Backend b) {
  const char* op = "wavelet_kan_backward";
  auto yshape = wavelet_shape(op, a.x, a.scale, a.translation, a.weight, a.wavelet, b);
  check_same_dtype(op, "grad_out", a.grad_out, a.x, "x");
  check_same_device(op, "grad_out", a.grad_out, a.x, "x");
  check_shape(op, "grad_out", a.grad_out, yshape);
  check_dense(op, "grad_out", a.grad_out);
  auto c = make_call(op, a, b, &check_scale_values<WaveletKanBackwardArgs>);
  const std::vector<int64_t> pshape{a.weight.shape[0], a.weight.shape[1]};
  int64_t rows = 1;
  for (int d = 0; d + 1 < a.x.ndim; ++d) rows *= a.x.shape[d];
  c->outputs = {std::vector<int64_t>(a.x.shape, a.x.shape + a.x.ndim), pshape, pshape, pshape};
  const uint8_t no_out = a.weight.shape[0] == 0, no_rows = rows == 0;
  c->zero_outputs = {no_out, no_rows, no_rows, no_rows};  // empty sums are zero
  return c;
}

void wavelet_kan(const WaveletKanArgs& a) {
  auto c = wavelet_kan_prepare(a, a.launch.backend);
  run_prepared(*c, "wavelet_kan", {&a.x, &a.scale, &a.translation, &a.weight, &a.out});
}

void wavelet_kan_backward(const WaveletKanBackwardArgs& a) {
  auto c = wavelet_kan_backward_prepare(a, a.launch.backend);
  run_prepared(*c, "wavelet_kan_backward",
               {&a.x, &a.scale, &a.translation, &a.weight, &a.grad_out, &a.grad_x, &a.grad_scale,
                &a.grad_translation, &a.grad_weight});
}

}  // namespace swisk
