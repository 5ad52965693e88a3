/*
 * ethosu.c: the status block of Arm Ethos-U delegate payloads (ethosu_status.h); the
 * `vela_bin_stream` is read in Python (pyflatmodule/executorch/backends/ethosu.py), a
 * fixed layout and no FlatBuffers.
 */
#include "backends/ethosu/ethosu_status.h"

FB_STATUS_BLOCK(eu_statuses, EU);
