/*
 * ethosu_status.h: the block of status codes of Arm Ethos-U delegate payloads, defined
 * in ethosu.c. The payload (a `vela_bin_stream`: named blocks holding the Vela compiler's
 * command stream, weights, scratch size and I/O descriptors) is read by
 * pyflatmodule/executorch/backends/ethosu.py, which raises these codes.
 */
#ifndef ETHOSU_STATUS_H
#define ETHOSU_STATUS_H

#include "fb/fb_common.h"

#define EU_STATUS_BASE 370
#define EU_STATUS_TABLE(X)                                                           \
    X(EU_E_BAD_BLOCK, "Ethos-U payload block is cut short, reaches past the payload, is out of place or has a name the runtime does not know") \
    X(EU_E_BAD_CONTENTS, "Ethos-U payload block's contents are malformed: a command stream without its COP1/COP2 magic, a scratch size or I/O list cut short, an external key of the wrong length")

FB_STATUS_CODES(eu_status, EU);
extern const fb_status_block eu_statuses;

#endif /* ETHOSU_STATUS_H */
