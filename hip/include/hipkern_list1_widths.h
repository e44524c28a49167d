/*
 * hipkern_list1_widths.h — internal (not installed): the one width
 * (targets per tile) of each tiled List 1 kernel, what
 * hipkern_list1_tile_targets answers. One place for the kernels
 * (list1_tiled.hip, where the measurements behind each width are) and the
 * cpu platform's stub (cpu_stub.c). Plain C.
 */
#ifndef HIPKERN_LIST1_WIDTHS_H
#define HIPKERN_LIST1_WIDTHS_H

#define HIPKERN_L1_TILED_TARGETS 64  /* HIPKERN_LIST1_TILED */
#define HIPKERN_L1_STAGED_TARGETS 32 /* HIPKERN_LIST1_STAGED */
#define HIPKERN_L1_FMA_TARGETS 32    /* HIPKERN_LIST1_TILED_FMA */

#endif /* HIPKERN_LIST1_WIDTHS_H */
