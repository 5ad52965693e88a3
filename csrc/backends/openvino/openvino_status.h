/*
 * openvino_status.h: the block of status codes of OpenVINO delegate payloads, defined in
 * openvino.c. The payload (a model OpenVINO's CPU plugin exported: a header of six
 * offsets and sizes, the plugin's own data, the constants and the model's IR, XML) is
 * read by pyflatmodule/executorch/backends/openvino.py, which raises these codes.
 */
#ifndef OPENVINO_STATUS_H
#define OPENVINO_STATUS_H

#include "fb/fb_common.h"

#define OV_STATUS_BASE 380
#define OV_STATUS_TABLE(X)                                                           \
    X(OV_E_BAD_HEADER, "OpenVINO payload header is cut short, or a region it gives lies outside the payload") \
    X(OV_E_BAD_MODEL, "OpenVINO model (IR XML) is malformed: not XML, a layer or edge without its ids, a port no edge feeds, an edge to a layer or port that does not exist") \
    X(OV_E_BAD_CONSTANT, "OpenVINO constant lies outside the payload's constants, or holds fewer bytes than its shape and element type need")

FB_STATUS_CODES(ov_status, OV);
extern const fb_status_block ov_statuses;

#endif /* OPENVINO_STATUS_H */
