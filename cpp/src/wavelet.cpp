// Frontends of the wavelet KAN ops: validate every argument, then dispatch.
#include "swisk/ops/wavelet.h"

#include "dtype_dispatch.h"
#include "validate.h"

namespace swisk {

static const char* const kWaveletNames[SWISK_NUM_WAVELETS] = {"mexican_hat", "morlet", "dog", "meyer", "shannon"};

const char* wavelet_names() { return "mexican_hat, morlet, dog, meyer, shannon"; }

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

std::vector<int64_t> wavelet_kan_shape(const TensorView& x, const TensorView& scale, const TensorView& translation,
                                       const TensorView& weight, const std::string& wavelet, Backend b) {
  check_common("wavelet_kan", x, scale, translation, weight, wavelet, b);
  std::vector<int64_t> shape(x.shape, x.shape + x.ndim);
  shape.back() = weight.shape[0];
  return shape;
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

static void check_inputs_data(const char* op, const TensorView& x, const TensorView& scale,
                              const TensorView& translation, const TensorView& weight, Backend b) {
  check_dense(op, "x", x);
  check_dense(op, "translation", translation);
  check_dense(op, "weight", weight);
  check_scale(op, scale, b);
}

static void check_output(const char* op, const char* name, const TensorView& t, const TensorView& x,
                         const std::vector<int64_t>& shape) {
  check_same_dtype(op, name, t, x, "x");
  check_same_device(op, name, t, x, "x");
  check_shape(op, name, t, shape);
  check_dense(op, name, t);
}

void wavelet_kan(const WaveletKanArgs& a) {
  const char* op = "wavelet_kan";
  auto shape = wavelet_kan_shape(a.x, a.scale, a.translation, a.weight, a.wavelet, a.launch.backend);
  check_inputs_data(op, a.x, a.scale, a.translation, a.weight, a.launch.backend);
  check_output(op, "out", a.out, a.x, shape);
  registry().run(op, a);
}

void wavelet_kan_backward(const WaveletKanBackwardArgs& a) {
  const char* op = "wavelet_kan_backward";
  check_common(op, a.x, a.scale, a.translation, a.weight, a.wavelet, a.launch.backend);
  check_inputs_data(op, a.x, a.scale, a.translation, a.weight, a.launch.backend);
  std::vector<int64_t> yshape(a.x.shape, a.x.shape + a.x.ndim), xshape = yshape;
  yshape.back() = a.weight.shape[0];
  const std::vector<int64_t> pshape{a.weight.shape[0], a.weight.shape[1]};
  check_output(op, "grad_out", a.grad_out, a.x, yshape);
  check_output(op, "grad_x", a.grad_x, a.x, xshape);
  check_output(op, "grad_scale", a.grad_scale, a.x, pshape);
  check_output(op, "grad_translation", a.grad_translation, a.x, pshape);
  check_output(op, "grad_weight", a.grad_weight, a.x, pshape);
  registry().run(op, a);
}

}  // namespace swisk
