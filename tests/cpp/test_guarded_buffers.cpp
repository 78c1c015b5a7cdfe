// Buffer sentinels: a write past either end of a guarded buffer is reported, in-bounds work is not.
#include <stdexcept>
#include <vector>

#include "emu/emulator.h"
#include "harness.h"
#include "swisk/error.h"

namespace {

using ::swisk::emu::GuardedBuffer;
using ::swisk::emu::with_guarded_buffers;

}  // namespace

TEST(GuardedBuffers, InBoundsWritesComeBack) {
  std::vector<float> in{1, 2, 3, 4}, out(4, 0.0f);
  float* x = in.data();
  float* y = out.data();
  with_guarded_buffers({{(void**)&x, in.size() * sizeof(float)}, {(void**)&y, out.size() * sizeof(float)}}, [&] {
    EXPECT_TRUE(x != in.data());  // the body sees the guarded copies
    EXPECT_TRUE(y != out.data());
    for (int k = 0; k < 4; ++k) y[k] = 2 * x[k];
  });
  EXPECT_TRUE(x == in.data());
  EXPECT_TRUE(y == out.data());
  for (int k = 0; k < 4; ++k) EXPECT_EQ(out[k], 2.0f * in[k]);
}

// Under AddressSanitizer the sentinels are poisoned: these writes are ASan's reports, not the guards'.
#if !SWISK_EMU_ASAN
TEST(GuardedBuffers, WritePastTheEnd) {
  std::vector<float> a(8, 0.0f), b(5, 0.0f);
  float *pa = a.data(), *pb = b.data();
  EXPECT_THROW_MSG(with_guarded_buffers({{(void**)&pa, 8 * sizeof(float)}, {(void**)&pb, 5 * sizeof(float)}},
                                        [&] { pb[5] = 1.0f; }),
                   swisk::Error, "[emulator] buffer 1: write out of bounds after");
  EXPECT_TRUE(pa == a.data());
  EXPECT_TRUE(pb == b.data());
}

TEST(GuardedBuffers, WriteBeforeTheStart) {
  std::vector<int> a(16, 0);
  int* p = a.data();
  EXPECT_THROW_MSG(with_guarded_buffers({{(void**)&p, 16 * sizeof(int)}}, [&] { p[-3] = 9; }), swisk::Error,
                   "[emulator] buffer 0: write out of bounds before");
  EXPECT_TRUE(p == a.data());
}
#endif

TEST(GuardedBuffers, LastAndFirstBytesAreInBounds) {
  std::vector<unsigned char> a(13, 0);
  unsigned char* p = a.data();
  with_guarded_buffers({{(void**)&p, a.size()}}, [&] {
    p[0] = 0xAB;
    p[12] = 0xCD;
  });
  EXPECT_EQ(int(a[0]), 0xAB);
  EXPECT_EQ(int(a[12]), 0xCD);
}

TEST(GuardedBuffers, AliasedBuffersShareOneCopy) {
  std::vector<float> a{1, 2, 3};
  float *x = a.data(), *y = a.data();
  with_guarded_buffers({{(void**)&x, 3 * sizeof(float)}, {(void**)&y, 3 * sizeof(float)}}, [&] {
    EXPECT_TRUE(x == y);
    for (int k = 0; k < 3; ++k) y[k] = x[k] + 1;
  });
  EXPECT_EQ(a[2], 4.0f);
}

TEST(GuardedBuffers, PointersRestoredWhenTheBodyThrows) {
  std::vector<float> a(4, 0.0f);
  float* p = a.data();
  EXPECT_THROW_MSG(with_guarded_buffers({{(void**)&p, 4 * sizeof(float)}}, [] { throw std::runtime_error("kernel failed"); }),
                   std::runtime_error, "kernel failed");
  EXPECT_TRUE(p == a.data());
}

TEST(GuardedBuffers, NullStaysNullAndAliasesTakeTheLargestSize) {
  std::vector<float> a(6, 1.0f);
  float *x = a.data(), *y = a.data(), *absent = nullptr;
  with_guarded_buffers({{(void**)&x, 2 * sizeof(float)}, {(void**)&absent, 16}, {(void**)&y, 6 * sizeof(float)}}, [&] {
    EXPECT_TRUE(absent == nullptr);
    x[5] = 3.0f;  // in bounds of the larger alias
  });
  EXPECT_EQ(a[5], 3.0f);
}
