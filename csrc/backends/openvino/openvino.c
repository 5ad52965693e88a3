/*
 * openvino.c: the status block of OpenVINO delegate payloads (openvino_status.h); the
 * payload is read in Python (pyflatmodule/executorch/backends/openvino.py): a fixed
 * header and an XML model, no FlatBuffers.
 */
#include "backends/openvino/openvino_status.h"

FB_STATUS_BLOCK(ov_statuses, OV);
