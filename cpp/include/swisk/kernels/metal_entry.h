// Conventions of Metal entry points: buffers first, then the parameter struct, then coordinates.
#pragma once

#include "swisk/kernels/dialect.h"

#if defined(SWISK_DIALECT_METAL)
#define SWISK_METAL_COORDS                                                                   \
  uint3 sk_tid [[thread_position_in_threadgroup]], uint3 sk_bid [[threadgroup_position_in_grid]], \
      uint3 sk_bdim [[threads_per_threadgroup]], uint3 sk_gdim [[threadgroups_per_grid]]
#define SWISK_METAL_COORD_TYPES uint3, uint3, uint3, uint3
#define SWISK_METAL_IDX \
  SkIdx { sk_tid.x, sk_tid.y, sk_bid.x, sk_bid.y, sk_bdim.x, sk_bdim.y, sk_gdim.x, sk_gdim.y }
#if defined(__METAL_VERSION__)
#define SWISK_HOST_NAME(name) [[host_name(name)]]
#else
#define SWISK_HOST_NAME(name)
#endif
#endif
