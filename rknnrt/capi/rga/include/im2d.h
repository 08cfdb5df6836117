/* im2d.h: the im2d API of librga (RGA 2D engine), as rknnrt's CPU stand-in provides it. */
#ifndef RKNNRT_IM2D_H
#define RKNNRT_IM2D_H
#define _im2d_h_
#include "im2d_version.h"
#include "im2d_type.h"
#include "im2d_common.h"
#include "im2d_buffer.h"
#include "im2d_single.h"
#include "im2d_task.h"
#include "im2d_mpi.h"
#endif
