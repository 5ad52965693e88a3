/*
 * etrecord.c: the status block of ETRecords (etrecord_status.h). Their reader is Python
 * (pyflatmodule/executorch/etrecord.py): a zip of JSON and torch.save archives holds
 * nothing the schema-driven core walks; the codes live here so that every FormatError
 * comes from one registry.
 */
#include "executorch/etrecord_status.h"

FB_STATUS_BLOCK(etr_statuses, ETR);
