/*
 * tosa_status.h: the block of status codes of Arm TOSA delegate payloads, defined in
 * tosa.c.
 */
#ifndef TOSA_STATUS_H
#define TOSA_STATUS_H

#include "fb/fb_common.h"

#define TOSA_STATUS_BASE 390
#define TOSA_STATUS_TABLE(X)                                                         \
    X(TOSA_E_BAD_TENSOR_NAME, "TOSA name is not a tensor or shape of its block, or a block holds it twice") \
    X(TOSA_E_BAD_CONSTANT, "TOSA constant data holds fewer bytes than its shape times its element size")

FB_STATUS_CODES(tosa_status, TOSA);
extern const fb_status_block tosa_statuses;

#endif /* TOSA_STATUS_H */
