/*
 * fb_tensor.h: the tensor numbers every format shares with torch: the c10::ScalarType
 * numbers the readers treat apart and the at::QScheme numbers of quantized tensors.
 */
#ifndef FB_TENSOR_H
#define FB_TENSOR_H

/* --- cdef begin --- */

/* c10::ScalarType numbers read apart; a tensor holds types 0 .. FB_SCALAR_TYPE_COUNT - 1. */
enum fb_scalar_type {
    FB_SCALAR_TYPE_FLOAT64 = 7,        /* the last of the plain real types 0 .. 7 */
    FB_SCALAR_TYPE_QINT8 = 12,
    FB_SCALAR_TYPE_QUINT8 = 13,
    FB_SCALAR_TYPE_QINT32 = 14,
    FB_SCALAR_TYPE_BFLOAT16 = 15,
    FB_SCALAR_TYPE_QUINT4X2 = 16,      /* 2 values a byte, low nibble first */
    FB_SCALAR_TYPE_QUINT2X4 = 17,      /* 4 values a byte */
    FB_SCALAR_TYPE_COUNT = 46
};

/* at::QScheme numbers of quantized tensors. */
enum fb_qscheme {
    FB_QSCHEME_PER_TENSOR_AFFINE = 0,
    FB_QSCHEME_PER_CHANNEL_AFFINE = 1,
    FB_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS = 4
};

/* --- cdef end --- */

#endif /* FB_TENSOR_H */
