/* im2d_expand.h: Android buffer imports (none on Linux); included by im2d.hpp. */
#ifndef RKNNRT_IM2D_EXPAND_H
#define RKNNRT_IM2D_EXPAND_H
#define _im2d_expand_h_
#include "im2d_type.h"
#endif
