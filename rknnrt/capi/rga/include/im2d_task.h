/* im2d_task.h: the job (task) API of librga is not part of rknnrt's CPU stand-in; this header
 * exists because im2d.h includes it. */
#ifndef RKNNRT_IM2D_TASK_H
#define RKNNRT_IM2D_TASK_H
#define _im2d_task_h_
#include "im2d_type.h"
#endif
