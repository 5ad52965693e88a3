/*
 * coreai.c: the status block of Apple Core AI delegate payloads (coreai_status.h); the
 * manifest is JSON, read in Python (pyflatmodule/executorch/backends/coreai.py).
 */
#include "backends/coreai/coreai_status.h"

FB_STATUS_BLOCK(cai_statuses, CAI);
