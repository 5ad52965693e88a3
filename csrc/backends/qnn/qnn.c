/*
 * qnn.c: the status block of QNN delegate payloads (qnn_status.h); their header is read
 * in Python (pyflatmodule/executorch/backends/qnn.py), a fixed layout and no FlatBuffers.
 */
#include "backends/qnn/qnn_status.h"

FB_STATUS_BLOCK(qnn_statuses, QNN);
