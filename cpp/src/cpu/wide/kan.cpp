// cpu/kan.cpp again, in 64-byte vectors with AVX-512 and baseline clones (clones.h, vec_math.h).
#define SK_VEC_BYTES 64
#define SK_VEC_ABI w64
#include "../kan.cpp"
