/*
 * vk_status.h: the block of status codes of Vulkan delegate payloads, defined in vk.c.
 */
#ifndef VK_STATUS_H
#define VK_STATUS_H

#include "fb/fb_common.h"

#define VK_STATUS_BASE 320
#define VK_STATUS_TABLE(X)                                                          \
    X(VK_E_BAD_PAYLOAD_HEADER, "Vulkan payload header (VH00) is malformed or reaches past the payload") \
    X(VK_E_BAD_VALUE_ID, "Vulkan value id is out of range")                        \
    X(VK_E_BAD_CONSTANT, "Vulkan constant id is out of range, or its bytes are not all in the constant bytes")

FB_STATUS_CODES(vk_status, VK);
extern const fb_status_block vk_statuses;

#endif /* VK_STATUS_H */
