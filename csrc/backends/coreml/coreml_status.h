/*
 * coreml_status.h: the block of status codes of Core ML delegate payloads, defined in
 * coreml.c. The payload (a directory flattened by ExecuTorch's inmemoryfs, holding a
 * Core ML package: a protobuf model spec and weight blobs) is read by
 * pyflatmodule/executorch/backends/coreml.py, which raises these codes.
 */
#ifndef COREML_STATUS_H
#define COREML_STATUS_H

#include "fb/fb_common.h"

#define CML_STATUS_BASE 340
#define CML_STATUS_TABLE(X)                                                          \
    X(CML_E_BAD_FILESYSTEM, "Core ML payload's file table (inmemoryfs) is malformed: its JSON, a node, a name, or a file's bytes outside the payload") \
    X(CML_E_BAD_SPEC, "Core ML model spec (protobuf) is malformed, or a value it names is not defined") \
    X(CML_E_BAD_BLOB, "Core ML weight blob is malformed, does not match its tensor, or lies outside its weight file")

FB_STATUS_CODES(cml_status, CML);
extern const fb_status_block cml_statuses;

#endif /* COREML_STATUS_H */
