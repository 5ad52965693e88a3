/*
 * schemas.c: the registry of the schemas compiled into the core, found by file
 * identifier (the Python reader and the generic verifier walk their descriptors).
 */
#include "fb/fb_schema.h"
#include "gen/executorch_flat_tensor.h"
#include "gen/executorch_program.h"
#include "gen/mobile_bytecode.h"
#include "gen/xnnpack.h"

static const fb_schema *const schemas[] = {&mobile_schema_file, &et_schema_file, &ft_schema_file,
                                            &xn_schema_file};

const fb_schema *fb_schema_find(uint32_t identifier) {
    size_t i;
    for (i = 0; i < sizeof schemas / sizeof schemas[0]; i++)
        if (schemas[i]->identifier == identifier) return schemas[i];
    return NULL;
}
