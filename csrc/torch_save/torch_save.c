/*
 * torch_save.c: the status block of zip and torch.save archives (torch_save_status.h).
 * Their reader is Python: a zip's directory and a pickle's opcodes are not FlatBuffers,
 * so the schema-driven core has nothing to walk; the codes live here so that every
 * FormatError comes from one registry.
 */
#include "torch_save/torch_save_status.h"

FB_STATUS_BLOCK(ts_statuses, TS);
