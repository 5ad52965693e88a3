"""Malformed PTMF input: every case must end in FormatError, never a crash or hang.

Files are crafted with tests/support/ptmf_craft.py (an independent writer): each case is the
small valid module of ``ptmf_craft.valid_module()`` with one thing broken. Every case
runs with verify=True (the verifier must reject it) and verify=False (the lazy path must
raise FormatError no later than a full decode, see ``full_decode``). Cases marked
VERIFY_ONLY break a rule that nothing on the lazy path reads or needs; with verify=False
they must still decode without any exception other than FormatError.
No torch here.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from typing import Any, Callable, Optional

import numpy as np
import pytest

import pyflatmodule as pfm

import support.ptmf_craft as c
from support.decode_all import check_error, full_decode, touch  # noqa: F401  (shared with the fuzz suites)
from support.paths import DATA, TESTS
from support.ptmf_craft import (
    CLASS_WITH_SETSTATE,
    Dict_,
    Enum,
    Func,
    Int,
    IntList,
    List,
    NoneV,
    Obj,
    Raw,
    Str,
    Tensor,
    Tuple,
    build,
    iv,
    mutated,
    patch,
    valid_module,
)

N = len(valid_module()["ivalues"])   # index of the first value appended by ``extra``
FN = 7                               # the Function in valid_module()
I32_MAX = 2**31 - 1


# ------------------------------------------------------------------ helpers

def raises(data: bytes, verify: bool, path: str = "", code: Optional[str] = None,
           ) -> pfm.FormatError:
    """load + full decode must raise a well-formed FormatError."""
    with pytest.raises(pfm.FormatError) as info:
        full_decode(pfm.load(data, verify=verify))
    check_error(info.value, data, path, code)
    return info.value


def graceful(data: bytes, verify: bool) -> Optional[pfm.FormatError]:
    """load + full decode either succeeds or raises a well-formed FormatError."""
    try:
        full_decode(pfm.load(data, verify=verify))
    except pfm.FormatError as e:
        check_error(e, data)
        return e
    return None


def extra(*values: Any, **changes: Any) -> bytes:
    """valid_module() with ``values`` appended as ivalues[N], [N+1]...."""
    m = mutated(**changes)
    m["ivalues"] = m["ivalues"] + list(values)
    return build(m)


def func(**changes: Any) -> bytes:
    """valid_module() with fields of its Function (ivalues[FN]) replaced."""
    m = valid_module()
    m["ivalues"][FN].update(changes)
    return build(m)


def schema_default(index: int) -> bytes:
    m = valid_module()
    m["ivalues"][FN]["schema"]["arguments"][1]["default_value"] = index
    return build(m)


def setstate_object(setstate_func: int, state: int = 2) -> bytes:
    """A CLASS_WITH_SETSTATE object (object type 1) appended as ivalues[N]."""
    m = valid_module()
    m["object_types"].append({"type_name": "__torch__.S", "type": CLASS_WITH_SETSTATE,
                              "attr_names": []})
    m["ivalues"].append(Obj(1, None, state=state, setstate_func=setstate_func))
    return build(m)


def quantized(qscheme: int, **schema: Any) -> bytes:
    """A quint8 [2, 3] tensor over the 24-byte storage with the given schema."""
    return extra(Tensor([2, 3], scalar_type=13,
                        quantized_schema=dict(qscheme=qscheme, scale=0.5, zero_point=3,
                                              **schema)))


def per_channel(n_scales: int = 2, axis: int = 0) -> bytes:
    return quantized(1, axis=axis, scales=Tensor([n_scales], scalar_type=7),
                     zero_points=Tensor([2], scalar_type=4))


def with_patch(fn: Callable[[bytes], bytes]) -> Callable[[], bytes]:
    return lambda: fn(build(valid_module()))


def to_last_byte(d: bytes) -> bytes:
    at = c.ivalue_slot(d, 2)
    return patch(d, at, "<I", len(d) - 1 - at)


def union_to_last_byte(d: bytes) -> bytes:
    at = c.field_pos(d, c.deref(d, c.ivalue_slot(d, 2)), 1)
    return patch(d, at, "<I", len(d) - 1 - at)


def vtable_outside(d: bytes) -> bytes:
    table = c.deref(d, c.ivalue_slot(d, 2))
    return patch(d, table, "<i", table - (len(d) + 64))


def module_vtable(d: bytes, at: int, value: int) -> bytes:
    root = c.u32(d, 0)
    vt = root - int(np.frombuffer(d, "<i4", 1, root)[0])
    return patch(d, vt + at, "<H", value)


IV = "ivalues[{}].val<{}>".format

# Cases: id -> (make bytes, expected path prefix, expected code or None).
CASES = {
    # -- torch crashers
    "function_class_type_past_object_types": (
        lambda: func(class_type=1), IV(FN, "Function") + ".class_type", "bad_type_index"),
    "union_type_17": (lambda: extra(iv("String", type=17, data="x")),
                      f"ivalues[{N}].val_type", "bad_union_type"),
    "union_type_200": (lambda: extra(iv("NONE", type=200)),
                       f"ivalues[{N}].val_type", "bad_union_type"),
    "setstate_func_0": (lambda: setstate_object(0), IV(N, "Object") + ".setstate_func",
                        "kind_mismatch"),
    "setstate_func_not_function": (lambda: setstate_object(1),
                                   IV(N, "Object") + ".setstate_func", "kind_mismatch"),
    "setstate_func_out_of_range": (lambda: setstate_object(99), IV(N, "Object"),
                                   "bad_index"),
    "state_obj_out_of_range": (lambda: build(mutated(state_obj=N)), "state_obj",
                               "bad_index"),
    "state_obj_not_object": (lambda: build(mutated(state_obj=1)), "state_obj",
                             "kind_mismatch"),
    # -- cross-references out of range
    "list_item": (lambda: extra(List([1, 99])), IV(N, "List") + ".items[1]", "bad_index"),
    "tuple_item": (lambda: extra(Tuple([99])), IV(N, "Tuple") + ".items[0]", "bad_index"),
    "dict_key": (lambda: extra(Dict_([2, 99], [1, 1])), IV(N, "Dict") + ".keys[1]",
                 "bad_index"),
    "dict_value": (lambda: extra(Dict_([2], [99])), IV(N, "Dict") + ".values[0]",
                   "bad_index"),
    "dict_lengths_differ": (lambda: extra(Dict_([2], [1, 1])), IV(N, "Dict") + ".values",
                            "length_mismatch"),
    "object_attr": (lambda: extra(Obj(0, [1, 99])), IV(N, "Object") + ".attrs[1]",
                    "bad_index"),
    "object_state": (lambda: extra(Obj(0, [1], state=99)), IV(N, "Object") + ".state",
                     "bad_index"),
    "object_type_index": (lambda: extra(Obj(1, [1])), IV(N, "Object") + ".type_index",
                          "bad_type_index"),
    "enum_value": (lambda: extra(Enum("__torch__.Color", 99)), IV(N, "EnumValue") + ".value",
                   "bad_index"),
    "function_constants": (lambda: func(constants=[1, 99]), IV(FN, "Function") + ".constants",
                           "bad_index"),
    "arg_default_value": (lambda: schema_default(99),
                          IV(FN, "Function") + ".schema.arguments[1].default_value",
                          "bad_index"),
    "module_methods": (lambda: build(mutated(methods=[FN, 99])), "methods", "bad_index"),
    "module_methods_not_function": (lambda: build(mutated(methods=[1])), "methods",
                                    "kind_mismatch"),
    "module_jit_constants": (lambda: build(mutated(jit_constants=[1, 99])),
                             "jit_constants[1]", "bad_index"),
    "tensor_storage_index": (lambda: extra(Tensor([2], storage=1)),
                             IV(N, "TensorMetadata") + ".storage_location_index",
                             "bad_storage_index"),
    # -- forward references, self references, a cycle
    "list_forward": (lambda: extra(List([N + 1]), Int(1)), IV(N, "List") + ".items[0]",
                     "forward_reference"),
    "list_self": (lambda: extra(List([N])), IV(N, "List") + ".items[0]", "forward_reference"),
    "tuple_self": (lambda: extra(Tuple([1, N])), IV(N, "Tuple") + ".items[1]",
                   "forward_reference"),
    "dict_key_self": (lambda: extra(Dict_([N], [1])), IV(N, "Dict") + ".keys[0]",
                      "forward_reference"),
    "dict_value_forward": (lambda: extra(Dict_([2], [N + 1]), Int(1)),
                           IV(N, "Dict") + ".values[0]", "forward_reference"),
    "object_attr_self": (lambda: extra(Obj(0, [N])), IV(N, "Object") + ".attrs[0]",
                         "forward_reference"),
    "object_state_self": (lambda: extra(Obj(0, [], state=N)), IV(N, "Object") + ".state",
                          "forward_reference"),
    "enum_self": (lambda: extra(Enum("__torch__.Color", N)), IV(N, "EnumValue") + ".value",
                  "forward_reference"),
    "cycle": (lambda: extra(List([N + 1]), List([N])), IV(N, "List") + ".items[0]",
              "forward_reference"),
    # -- tensors
    "scalar_type_46": (lambda: extra(Tensor([2], scalar_type=46)),
                       IV(N, "TensorMetadata") + ".scalar_type", "bad_scalar_type"),
    "scalar_type_127": (lambda: extra(Tensor([2], scalar_type=127)),
                        IV(N, "TensorMetadata") + ".scalar_type", "bad_scalar_type"),
    "scalar_type_minus_1": (lambda: extra(Tensor([2], scalar_type=-1)),
                            IV(N, "TensorMetadata") + ".scalar_type", "bad_scalar_type"),
    "negative_size": (lambda: extra(Tensor([2, -1], [1, 1])),
                      IV(N, "TensorMetadata") + ".sizes[1]", "negative_dimension"),
    "negative_stride": (lambda: extra(Tensor([2, 3], [-3, 1])),
                        IV(N, "TensorMetadata") + ".strides[0]", "negative_dimension"),
    "negative_storage_offset": (lambda: extra(Tensor([2], storage_offset=-1)),
                                IV(N, "TensorMetadata") + ".storage_offset",
                                "negative_dimension"),
    "sizes_strides_lengths_differ": (lambda: extra(Tensor([2, 3], [1])),
                                     IV(N, "TensorMetadata") + ".strides", "length_mismatch"),
    "view_one_byte_past_storage": (lambda: extra(Tensor([25], scalar_type=0)),
                                   IV(N, "TensorMetadata"), "outside_storage"),
    "offset_view_one_byte_past_storage": (
        lambda: extra(Tensor([24], scalar_type=0, storage_offset=1)),
        IV(N, "TensorMetadata"), "outside_storage"),
    "strided_view_past_storage": (lambda: extra(Tensor([2, 2], [5, 1])),  # float32: 28 > 24
                                  IV(N, "TensorMetadata"), "outside_storage"),
    "extent_overflow_4_dims": (lambda: extra(Tensor([I32_MAX] * 4, [I32_MAX] * 4)),
                               IV(N, "TensorMetadata"), None),
    "extent_overflow_5_dims": (lambda: extra(Tensor([I32_MAX] * 5, [I32_MAX] * 5)),
                               IV(N, "TensorMetadata"), None),
    # No element, but numpy refuses the shape: 2^63 elements in the other sizes.
    "empty_with_other_sizes_overflowing": (
        lambda: extra(Tensor([0, 2, 2**16, 2**16, 2**30], [1] * 5)), IV(N, "TensorMetadata"),
        "extent_overflow"),
    "extent_overflow_8_dims_float64": (
        lambda: extra(Tensor([I32_MAX] * 8, [I32_MAX] * 8, scalar_type=7)),
        IV(N, "TensorMetadata"), None),
    # (2^30+1 - 1) * 2^30 twice = 2^61 elements: (2^61 + 1) * 8 bytes wraps to 8.
    "extent_wraps_to_8_bytes_float64": (
        lambda: extra(Tensor([2**30 + 1] * 2, [2**30] * 2, scalar_type=7)),
        IV(N, "TensorMetadata"), None),
    # 2^29 + 2^29 * (2^31 - 1) = 2^60 elements of 16 bytes: wraps to 16.
    "extent_wraps_to_16_bytes_complex128": (
        lambda: extra(Tensor([2**29 + 1], [I32_MAX], scalar_type=10, storage_offset=2**29)),
        IV(N, "TensorMetadata"), None),
    "qscheme_2": (lambda: quantized(2), IV(N, "TensorMetadata") + ".quantized_schema",
                  "bad_quantization"),
    "qscheme_3": (lambda: quantized(3), IV(N, "TensorMetadata") + ".quantized_schema",
                  "bad_quantization"),
    "qscheme_5": (lambda: quantized(5), IV(N, "TensorMetadata") + ".quantized_schema",
                  "bad_quantization"),
    "per_channel_wrong_scale_count": (lambda: per_channel(n_scales=3),
                                      IV(N, "TensorMetadata") + ".quantized_schema.scales",
                                      "length_mismatch"),
    "per_channel_axis_2": (lambda: per_channel(axis=2),
                           IV(N, "TensorMetadata") + ".quantized_schema", "bad_quantization"),
    "per_channel_axis_minus_1": (lambda: per_channel(axis=-1),
                                 IV(N, "TensorMetadata") + ".quantized_schema",
                                 "bad_quantization"),
    "per_channel_missing_zero_points": (
        lambda: quantized(1, axis=0, scales=Tensor([2], scalar_type=7)),
        IV(N, "TensorMetadata") + ".quantized_schema.zero_points", "missing_field"),
    "quantized_schema_on_float_tensor": (
        lambda: extra(Tensor([2], quantized_schema={"qscheme": 0, "scale": 1.0})),
        IV(N, "TensorMetadata"), "bad_quantization"),
    "quantized_dtype_without_schema": (lambda: extra(Tensor([2], scalar_type=12)),
                                       IV(N, "TensorMetadata"), "bad_quantization"),
    # quint4x2 (2 values a byte) with stride 0: a 4-byte extent, 2^62-1 logical values.
    "packed_quint4x2_huge_stride_0": (
        lambda: extra(Tensor([I32_MAX, I32_MAX], [0, 0], scalar_type=16,
                             quantized_schema={"qscheme": 0, "scale": 1.0})),
        IV(N, "TensorMetadata"), None),
    # -- strings and vectors
    "vector_length_2p32_minus_1": (lambda: extra(List(Raw(b"", 0xFFFFFFFF))),
                                   IV(N, "List") + ".items", "out_of_bounds"),
    "string_length_2p32_minus_1": (lambda: extra(Str(Raw(b"", 0xFFFFFFFF))),
                                   IV(N, "String") + ".data", "out_of_bounds"),
    "int_list_length_2p29": (lambda: extra(IntList(Raw(b"", 2**29, align=8))),
                             IV(N, "IntList") + ".items", "out_of_bounds"),
    "storage_length_2p32_minus_1": (
        lambda: build(mutated(storage_data=[{"data": Raw(b"", 0xFFFFFFFF)}])),
        "storage_data[0].data", "out_of_bounds"),
    "string_bad_utf8": (lambda: extra(Str(b"ok\xff\xfe")), IV(N, "String") + ".data",
                        "bad_utf8"),
    # a List key: no TorchScript key type, and no Python dict holds it
    "dict_key_unhashable": (lambda: extra(Dict_([4], [1], "Dict[List[int], int]")),
                            IV(N, "Dict") + ".keys", "unhashable_key"),
    "offset_to_last_byte": (with_patch(to_last_byte), "ivalues[2]", "out_of_bounds"),
    "union_offset_to_last_byte": (with_patch(union_to_last_byte), "ivalues[2]",
                                  "out_of_bounds"),
    "vtable_outside_buffer": (with_patch(vtable_outside), "ivalues[2]", "bad_vtable"),
    # a vtable of 0 or 2 bytes has no fields (FlatBuffers' verifier takes it): the module's
    # state_obj then defaults to ivalue 0 of none
    "vtable_size_2": (with_patch(lambda d: module_vtable(d, 0, 2)), "state_obj", "bad_index"),
    "vtable_size_0": (with_patch(lambda d: module_vtable(d, 0, 0)), "state_obj", "bad_index"),
    "vtable_field_past_buffer": (with_patch(lambda d: module_vtable(d, 4 + 2 * 4, 0xFFF0)),
                                 "ivalues", "out_of_bounds"),
    # a String whose union offset points at an 8-byte Int struct
    "union_string_over_int_struct": (lambda: extra(iv("Int", type=6, value=5)),
                                     f"ivalues[{N}]", None),
    "union_string_over_int_struct_far": (lambda: extra(iv("Int", type=6, value=I32_MAX)),
                                         f"ivalues[{N}]", None),
    "union_table_type_without_payload": (lambda: extra(iv("NONE", type=6)),
                                         f"ivalues[{N}]", "missing_field"),
    "union_struct_type_without_payload": (lambda: extra(iv("NONE", type=1)),
                                          f"ivalues[{N}]", "missing_field"),
    # -- verifier-only consistency rules (VERIFY_ONLY below)
    "string_without_nul": (lambda: extra(Str(Raw(b"abcX", 3))), IV(N, "String") + ".data",
                           "no_nul"),
    "object_more_attrs_than_names": (lambda: extra(Obj(0, [1, 1, 1, 1, 1, 1])),
                                     IV(N, "Object") + ".attrs", "length_mismatch"),
    "object_type_kind_0": (lambda: build(mutated(object_types=[
        {"type_name": "__torch__.M", "type": 0, "attr_names": ["count"]}])),
        "object_types[0].type", "bad_object_kind"),
    "storage_data_size_mismatch": (lambda: build(mutated(storage_data_size=2)),
                                   "storage_data_size", "length_mismatch"),
    "debug_handles_count": (lambda: func(debug_info={"debug_handle": [1]}),
                            IV(FN, "Function") + ".debug_info.debug_handle",
                            "length_mismatch"),
}

# Rules the lazy path does not enforce; with verify=False these decode gracefully:
# a string's terminator (the length is used), attrs beyond attr_names (sliced off),
# the object kind and storage_data_size (unused), debug handle counts (returned as
# stored), Function.class_type out of range (Function.class_type gives ""), a set-state
# object whose setstate_func is no Function (its restored attributes are empty), and
# jit_constants (no accessor reads them).
VERIFY_ONLY = {
    "string_without_nul", "object_more_attrs_than_names", "object_type_kind_0",
    "storage_data_size_mismatch", "debug_handles_count",
    "function_class_type_past_object_types", "setstate_func_0",
    "setstate_func_not_function", "module_jit_constants",
}
# Where the lazy path reports a different code than the verifier.
LAZY_CODE = {"module_methods": "kind_mismatch"}


# ------------------------------------------------------------ the valid module

def test_valid_module_reads_back() -> None:
    desc = valid_module()
    data = build(desc)
    for verify in (True, False):
        m = pfm.load(data, verify=verify)
        full_decode(m)
        ivs = desc["ivalues"]
        expected = [None, ivs[1]["value"], ivs[2]["data"], ivs[3]["value"]]
        expected.append([expected[j] for j in ivs[4]["items"]])
        assert [m.ivalues[i] for i in range(5)] == expected
        assert m.ivalues[6] is ivs[6]["value"]
        weight = c.STORAGE0.reshape(ivs[5]["sizes"])
        assert np.array_equal(m.ivalues[5], weight) and m.ivalues[5].dtype == np.float32
        root = m.root
        names = desc["object_types"][0]["attr_names"]
        assert root.type_name == "__torch__.M" and root.kind == "class_with_field"
        assert list(root.attributes) == names
        for n, j in zip(names, ivs[8]["attrs"]):
            assert np.array_equal(root.attributes[n], m.ivalues[j]), n
        assert root.count == expected[1] and root.name == expected[2] and root.training
        assert list(m.state_dict()) == ["weight"]
        assert np.array_equal(m.state_dict()["weight"], weight)
        (f,) = m.functions()
        spec = desc["ivalues"][FN]
        assert m.methods == {spec["qn"]: f}
        assert f.instructions.tolist() == spec["instructions"]
        assert f.operators == [tuple(op.values()) for op in spec["operators"]]
        assert f.constants == [expected[1]] and f.register_size == spec["register_size"]
        assert f.type_annotations == ["List[int]"] and f.class_type == "__torch__.M"
        assert f.debug_handles.tolist() == spec["debug_info"]["debug_handle"]
        assert [tuple(a) for a in f.schema.arguments] == [("self", "__torch__.M", None),
                                                          ("x", "int", expected[1])]
        assert [tuple(a) for a in f.schema.returns] == [("", "int", None)]
        assert m.extra_files == desc["extra_files"]
        assert m.jit_sources == desc["jit_sources"]
        assert m.object_types == [("__torch__.M", "class_with_field", tuple(names))]
        assert (m.bytecode_version, m.operator_version) == (9, 7)
        assert m.info()["function_names"] == {spec["qn"]}


def test_crafted_building_blocks_are_valid() -> None:
    """The pieces the bad cases break are accepted when intact."""
    good = [quantized(0), per_channel(), extra(Tensor([24], scalar_type=0)),
            extra(Tensor([23], scalar_type=0, storage_offset=1)), extra(Tensor([2, 2], [4, 1])),
            extra(Dict_([2], [1]), Enum("__torch__.Color", 1), Tuple([1, 2]), Obj(0, [1])),
            setstate_object(FN), extra(Str(Raw(b"abc\0", 3)))]
    for data in good:
        for verify in (True, False):
            full_decode(pfm.load(data, verify=verify))
    q = pfm.load(per_channel()).ivalues[N]
    assert q.qscheme == "per_channel_affine" and q.axis == 0 and len(q.scales) == 2


@pytest.mark.parametrize("verify", [True, False], ids=["verify", "lazy"])
def test_tensor_dict_keys_are_tensor_keys(verify: bool) -> None:
    """Dict[Tensor, V] is valid TorchScript: each key decodes to a TensorKey holding
    the tensor (from the file's bytes), hashed by that tensor's identity as torch
    hashes tensors; one value at a time and in bulk alike."""
    data = extra(Tensor([2]), Dict_([5, N], [1, 6], "Dict[Tensor, int]"))
    m = pfm.load(data, verify=verify)
    for d in (m.ivalues[N + 1], list(m.ivalues)[N + 1]):
        assert type(d) is dict and list(d.values()) == [42, True]
        first, second = d
        assert isinstance(first, pfm.TensorKey) and isinstance(second, pfm.TensorKey)
        assert np.array_equal(first.value, c.STORAGE0.reshape(2, 3))
        assert np.array_equal(second.value, c.STORAGE0[:2])
        assert first.value.dtype == second.value.dtype == np.float32
        assert repr(first) == "TensorKey(shape=(2, 3), dtype=float32)"
        assert first == pfm.TensorKey(first.value) and first != second
        assert pfm.TensorKey(first.value.copy()) not in d and d[first] == 42


# ------------------------------------------------------------------ the cases

def test_a_list_over_a_double_structs_bytes_is_an_empty_table() -> None:
    """A List whose union offset points at a Double struct holding 1.0: the struct's low
    word, 0, read as the table's soffset puts its vtable on the table itself, and the
    vtable's size, 0, gives it no fields; FlatBuffers' verifier takes that table, so the
    list is empty. Strict mode holds tables to the builder's layout."""
    data = extra(iv("Double", type=7, value=1.0))
    for verify in (True, False):
        with pfm.load(data, verify=verify) as m:
            full_decode(m)
    with pytest.raises(pfm.FormatError) as e:
        pfm.load(data, strict=True)
    assert e.value.code == "bad_vtable"


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(name: str) -> None:
    make, path, code = CASES[name]
    data = make()
    raises(data, True, path, code)
    if name in VERIFY_ONLY:
        graceful(data, False)
    else:
        raises(data, False, path, LAZY_CODE.get(name, code))


# ------------------------------------------------------------ header and size

def _real(name: str) -> bytes:
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


SMALLEST = min((f for f in os.listdir(DATA) if f.endswith((".ff", ".ptl"))),
               key=lambda f: os.path.getsize(os.path.join(DATA, f)))


@pytest.mark.parametrize("data, code", [
    (b"", "too_small"), (b"PTMF", "too_small"), (b"\x08\0\0\0PTM", "too_small"),
    # a zip archive is read as an ETRecord, whose zip reader names the fault
    (b"PK\x03\x04" + bytes(60), "bad_zip"), (b"PK\x03\x04", "bad_zip"),
    (b"\x08\0\0\0XTMF" + bytes(24), "bad_identifier"),
    # the 12-byte file that segfaults torch: a root offset far past the end
    (b"\xf0\xff\xff\xffPTMF\0\0\0\0", "out_of_bounds"),
    (b"\x0c\0\0\0PTMF\0\0\0\0", "out_of_bounds"),
    (b"\x08\0\0\0PTMF\0\0\0\0", None),
], ids=["empty", "4_bytes", "7_bytes", "zip", "zip_4_bytes", "identifier", "12_bytes_huge_root",
        "12_bytes_root_at_end", "12_bytes_root_self"])
def test_header(data: bytes, code: Optional[str]) -> None:
    """Every rejection names a place, whole-file ones included (``header``)."""
    for verify in (True, False):
        e = raises(data, verify, "", code)
        if e.code in ("too_small", "zip_archive", "bad_identifier"):
            assert "header" == e.path, e
        else:
            assert e.path, e


def test_wrong_identifier_on_real_file() -> None:
    data = bytearray(_real(SMALLEST))
    data[4:8] = b"PTMf"
    for verify in (True, False):
        e = raises(bytes(data), verify, "header", "bad_identifier")
        assert e.offset == 4


# ------------------------------------------------------------ UTF-8, checked by verify

#: Byte strings at the edges of UTF-8, each judged by Python's strict decoder.
UTF8_EDGES = [
    b"", b"plain", b"\x00nul inside", "\u00e9\u20ac\U0001f600\U0010ffff".encode(),
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc2\x80", b"\xc2", b"\xc2\xc0",
    b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xed\xa0\x80",
    b"\xed\xbf\xbf", b"\xee\x80\x80", b"\xef\xbf\xbf", b"\xe1\x80", b"ok\xe1\x80\x41",
    b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80",
    b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xfe", b"\xff", b"\xf0\x90\x80",
    b"abc\xf1\x80\x80\x80def\xf3\xbf\xbf\xbf",
]


@pytest.mark.parametrize("text", UTF8_EDGES, ids=[t.hex() or "empty" for t in UTF8_EDGES])
def test_verify_judges_utf8_as_python_does(text: bytes) -> None:
    """The C validator accepts exactly what ``bytes.decode('utf-8')`` accepts, and
    names the first bad byte where Python does."""
    data = extra(Str(text))
    where = IV(N, "String") + ".data"
    try:
        expected = text.decode("utf-8")
    except UnicodeDecodeError as e:
        bad_at = e.start
    else:
        for verify in (True, False):
            with pfm.load(data, verify=verify) as m:
                assert expected == m.ivalues[N]
        return
    for verify in (True, False):
        error = raises(data, verify, where, "bad_utf8")
        assert text == data[error.offset - bad_at:error.offset - bad_at + len(text)]
    with pytest.raises(pfm.FormatError):
        pfm.load(data, verify=True)     # at load, not later


def _object_type(**fields: Any) -> bytes:
    types = [{"type_name": "__torch__.M", "type": 1,
              "attr_names": ["count", "name", "items", "weight", "training"]}]
    types[0].update(fields)
    return build(mutated(object_types=types))


#: Every kind of string the reader decodes as text, made invalid UTF-8.
BAD_TEXT = {
    "device": (lambda: extra(c.Device(b"cp\xffu")), IV(N, "Device") + ".str"),
    "enum_type_name": (lambda: extra(Enum(b"__torch__.\xc0\x80", 1)),
                       IV(N, "EnumValue") + ".type_name"),
    "object_type_name": (lambda: _object_type(type_name=b"__torch__.\xedM"),
                         "object_types[0].type_name"),
    "attr_name": (lambda: _object_type(attr_names=["count", b"na\xffme", "items", "weight",
                                                   "training"]),
                  "object_types[0].attr_names[1]"),
    "function_qn": (lambda: func(qn=b"__torch__.M.\xf4\x90\x80\x80"),
                    IV(FN, "Function") + ".qn"),
    "operator_name": (lambda: func(operators=[{"name": b"aten::\xe0\x80\x80",
                                               "overload_name": "int",
                                               "num_args_serialized": 2}]),
                      IV(FN, "Function") + ".operators[0].name"),
    "type_annotation": (lambda: func(type_annotations=[b"List[\xff]"]),
                        IV(FN, "Function") + ".type_annotations[0]"),
    "jit_source": (lambda: build(mutated(jit_sources={"__torch__": b"class M(\xff)"})),
                   "jit_sources[0].content"),
    "extra_file_name": (lambda: build(mutated(extra_files={b"m\xfft": b""})),
                        "extra_files[0].name"),
}


@pytest.mark.parametrize("name", list(BAD_TEXT))
def test_verify_rejects_text_that_is_not_utf8(name: str) -> None:
    """With verify, every string the reader would decode is checked at load: a file
    that loads never raises bad_utf8 later."""
    make, path = BAD_TEXT[name]
    data = make()
    with pytest.raises(pfm.FormatError) as info:
        pfm.load(data, verify=True)
    check_error(info.value, data, path, "bad_utf8")


@pytest.mark.parametrize("run", range(20))
def test_utf8_check_finds_the_byte_pythons_decoder_names(run: int) -> None:
    """The UTF-8 check takes ASCII runs a word at a time: after a run of any length, the
    first invalid byte is where Python's strict decoder says it is, and valid text after
    runs of every length loads."""
    valid = b"# " + b"a" * run + b"\xc3\xa9" + b"b" * run + b"\xf0\x9f\x98\x80 end"
    with pfm.load(build(mutated(jit_sources={"__torch__": valid})), verify=True) as m:
        assert valid.decode("utf-8") == m.jit_sources["__torch__"]
    for tail in (b"\xff", b"\xc3\xa9" + b"x" * run + b"\xe0\x80\x80", b"\xf0\x9f\x98 ",
                 b"\xed\xa0\x80"):
        content = b"# " + b"a" * run + tail + b" pad"
        with pytest.raises(UnicodeDecodeError) as decoded:
            content.decode("utf-8")
        data = build(mutated(jit_sources={"__torch__": content}))
        with pytest.raises(pfm.FormatError) as info:
            pfm.load(data, verify=True)
        check_error(info.value, data, "jit_sources[0].content", "bad_utf8")
        assert data.index(content) + decoded.value.start == info.value.offset


def test_extra_file_contents_are_bytes_not_text() -> None:
    data = build(mutated(extra_files={"blob": b"\xff\xfe\xc0\x80"}))
    with pfm.load(data, verify=True) as m:
        assert {"blob": b"\xff\xfe\xc0\x80"} == dict(m.extra_files)


@pytest.mark.parametrize("name", sorted({SMALLEST, "mlp_jit.ff"}))
def test_truncation_at_every_length(name: str) -> None:
    data = _real(name)
    full_decode(pfm.load(data))
    succeeded = []
    for n in range(len(data)):
        cut = data[:n]
        for verify in (True, False):
            try:
                full_decode(pfm.load(cut, verify=verify))
            except pfm.FormatError as e:
                check_error(e, cut)
            else:
                succeeded.append((n, verify))
    lengths = sorted({n for n, _ in succeeded})
    print(f"{name}: {len(data)} cuts x 2 modes, {len(succeeded)} loaded: lengths {lengths}")
    # Only cuts that remove unreferenced trailing padding may load.
    for n in lengths:
        assert not any(data[n:]), (n, data[n:])
        assert len(data) - n < 32
    # torch's files end in referenced bytes: the last few cuts must all fail.
    assert not set(range(len(data) - 8, len(data))) & set(lengths)


# --------------------------------------------------------------- nesting, size

def test_deep_list_chain_hits_depth_budget() -> None:
    data = c.list_chain(100_000)
    for verify in (True, False):
        raises(data, verify, "ivalues[200]", "depth_budget")


def test_chain_at_depth_budget_decodes() -> None:
    m = pfm.load(c.list_chain(199), verify=False)   # (the root is no Object)
    value, depth = m.ivalues[199], 0
    while value is not None:
        (value,), depth = value, depth + 1
    assert depth == 199


def test_million_element_list_of_one_shared_value() -> None:
    data = build({"ivalues": [NoneV(), Int(7), List(np.ones(1_000_000, "<u4")), Obj(0, [2])],
                  "state_obj": 3, "object_types": [
                      {"type_name": "__torch__.M", "type": 1, "attr_names": ["big"]}]})
    for verify in (True, False):
        start = time.perf_counter()
        value = pfm.load(data, verify=verify).ivalues[2]
        assert len(value) == 1_000_000 and value[0] == 7 and value[-1] == 7
        assert time.perf_counter() - start < 10


# ------------------------------------------- crafted content the Python layer parses

def test_deeply_nested_type_annotation() -> None:
    """info() parses type annotations; 5000 nested List[...] must not escape as
    RecursionError."""
    data = func(type_annotations=["List[" * 5000 + "int" + "]" * 5000])
    for verify in (True, False):
        graceful(data, verify)


def test_root_class_missing_from_jit_sources() -> None:
    """jit_sources declare a module class, but not the root's class."""
    data = build(mutated(jit_sources={
        "__torch__": "class Other(Module):\n  __parameters__ = []\n  __buffers__ = []\n"}))
    for verify in (True, False):
        graceful(data, verify)


@pytest.mark.parametrize("text", [
    "class A(\n" * 16000,              # 16k unclosed headers (144 kB)
    "class " + "A" * 60000 + "\n",     # one 60 kB header without a colon
], ids=["unclosed_headers", "long_header_line"])
def test_jit_sources_class_headers_parse_in_linear_time(text: str) -> None:
    """Reading class declarations from crafted jit_sources must stay fast: no regex
    that rescans the rest of the text (or line) from every position."""
    data = build(mutated(jit_sources={"__torch__": text}))
    start = time.perf_counter()
    graceful(data, True)
    assert time.perf_counter() - start < 1.5


def setstate_replay(instructions: Any, state: int, operators: Any = (),
                    constants: Any = (), more: Any = ()) -> bytes:
    """A set-state object (ivalues[N + 1]) of a class declared in jit_sources (one
    attribute ``x``), whose __setstate__ (ivalues[N]) runs ``instructions`` on ``state``
    (an ivalue index); ``more`` values follow as ivalues[N + 2]...."""
    m = valid_module()
    m["object_types"].append({"type_name": "__torch__.S", "type": CLASS_WITH_SETSTATE})
    m["jit_sources"]["__torch__"] += "class S:\n  x : Any\n"
    m["ivalues"] += [Func("__torch__.S.__setstate__", class_type=1, register_size=3,
                          instructions=list(instructions), operators=list(operators),
                          constants=list(constants)),
                     Obj(1, None, state=state, setstate_func=N), *more]
    return build(m)


def test_setstate_bytecode_not_on_a_tensor_state() -> None:
    """__setstate__ applying ``not`` to a multi-element tensor state."""
    data = setstate_replay([(4, 2, 1), (2, 0, 2), (42, 0, 0), (12, 0, 0)], state=5)
    for verify in (True, False):
        graceful(data, verify)


_CHILD = textwrap.dedent("""
    import resource, sys
    sys.path[:0] = {paths!r}
    # 3 GiB beyond what is mapped now (AddressSanitizer alone maps terabytes)
    with open("/proc/self/statm") as f:
        limit = int(f.read().split()[0]) * resource.getpagesize() + (3 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import pyflatmodule as pfm
    from support.decode_all import full_decode, peak_rss_kib
    try:
        full_decode(pfm.load(open({file!r}, "rb").read()))
    except pfm.FormatError as e:
        print("FormatError", e.code)
    print("maxrss_kib", peak_rss_kib())
""")


def decode_in_child(data: bytes, tmp_path: Any, timeout: float = 60) -> int:
    """Full decode in a child process (3 GiB address space); its peak RSS in MiB."""
    path = tmp_path / "crafted.ff"
    path.write_bytes(data)
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(pfm.__file__)))
    script = _CHILD.format(paths=[TESTS, package_parent], file=str(path))
    try:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"full decode ran over {timeout} s")
    assert out.returncode == 0 and "maxrss_kib" in out.stdout, out.stderr[-2000:]
    return int(out.stdout.split("maxrss_kib")[1]) // 1024


MUL = {"name": "aten::mul", "overload_name": "int", "num_args_serialized": 2}


def test_setstate_bytecode_squaring_loop_is_bounded(tmp_path: Any) -> None:
    """A __setstate__ squaring an int in an endless loop must not hang."""
    decode_in_child(setstate_replay(
        [(4, 2, 1), (8, 0, 0), (5, 0, 3),                    # STOREN r1 r2; r3 = 42
         (2, 0, 3), (2, 0, 3), (0, 0, 0), (5, 0, 3),          # r3 = r3 * r3
         (10, 0, -4)],                                        # JMP back
        state=1, constants=[1], operators=[MUL]), tmp_path)


def test_setstate_bytecode_list_repeat_is_bounded(tmp_path: Any) -> None:
    """A __setstate__ computing ``[42, "hello", 2.5] * 2**25`` (100M items, 800 MB):
    replayed values must be bounded like its strings and ints are."""
    rss = decode_in_child(setstate_replay(
        [(4, 2, 1), (2, 0, 1), (8, 0, 0), (8, 0, 1), (0, 0, 0), (22, 0, 0), (12, 0, 0)],
        state=1, constants=[4, N + 2], operators=[MUL], more=[Int(2**25)]), tmp_path)
    limit = 1200 if "asan" in os.environ.get("LD_PRELOAD", "") else 400
    assert rss < limit, f"peak RSS {rss} MiB"


def test_missing_struct_payload_offset_names_the_ivalue() -> None:
    """An Int ivalue without its struct: the offset should point at the IValue table
    (as it does for a table member without payload), not at byte 0."""
    for kind in (1, 6):     # Int (struct), String (table)
        data = extra(iv("NONE", type=kind))
        table = c.deref(data, c.ivalue_slot(data, N))
        for verify in (True, False):
            e = raises(data, verify, f"ivalues[{N}]", "missing_field")
            assert e.offset == table, (kind, e.offset, table)
