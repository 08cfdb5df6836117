/* im2d_mpi.h: librga's MPI context API is not part of rknnrt's CPU stand-in; this header exists
 * because im2d.h includes it. */
#ifndef RKNNRT_IM2D_MPI_H
#define RKNNRT_IM2D_MPI_H
#define _im2d_mpi_h_
#include "im2d_type.h"
#endif
