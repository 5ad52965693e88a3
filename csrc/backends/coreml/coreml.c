/*
 * coreml.c: the status block of Core ML delegate payloads (coreml_status.h). Their
 * reader is Python (pyflatmodule/executorch/backends/coreml.py): the payload's file
 * table is JSON and its model spec protobuf, neither of them FlatBuffers, so the
 * schema-driven core has nothing to walk; the codes live here so that every FormatError
 * comes from one registry.
 */
#include "backends/coreml/coreml_status.h"

FB_STATUS_BLOCK(cml_statuses, CML);
