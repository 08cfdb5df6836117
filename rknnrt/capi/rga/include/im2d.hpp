/* im2d.hpp: the C++ entry point of the im2d API. */
#ifndef RKNNRT_IM2D_HPP
#define RKNNRT_IM2D_HPP
#define _im2d_hpp_
#include "im2d.h"
#include "im2d_expand.h"
#endif
