"""Records the C core fills: numpy dtypes laid out as its structs, and the small array
helpers every wing uses to hand them to C and read them back in columns."""
from __future__ import annotations

import functools
from typing import Any, Dict, List, Sequence

from .lazy import np
from .native import ffi

__all__ = ["c_array", "columns", "distinct", "struct_dtype"]

_C_TO_NUMPY = {"uint64_t": "<u8", "int64_t": "<i8", "uint32_t": "<u4", "int32_t": "<i4",
               "uint16_t": "<u2", "uint8_t": "u1", "int8_t": "i1", "double": "<f8",
               "int": "<i4"}


@functools.lru_cache(maxsize=None)
def struct_dtype(cname: str) -> np.dtype:
    """A numpy dtype laid out exactly like the C struct (padding and reserved skipped);
    a nested struct's fields are named ``<field>_<its field>``. Made once per struct, at
    its first use (numpy is imported then)."""
    names: List[str] = []
    formats: List[str] = []
    offsets: List[int] = []

    def add(ctype: Any, prefix: str, base: int) -> None:
        for name, f in ctype.fields:
            if f.type.kind == "struct":
                add(f.type, f"{prefix}{name}_", base + f.offset)
            elif f.type.kind == "primitive":
                names.append(prefix + name)
                formats.append(_C_TO_NUMPY[f.type.cname])
                offsets.append(base + f.offset)

    add(ffi.typeof(cname), "", 0)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": ffi.sizeof(cname)})



def c_array(cname: str, array: np.ndarray) -> Any:
    return ffi.from_buffer(cname + "[]", array, require_writable=True)


def columns(table: np.ndarray, fields: Sequence[str], rows: np.ndarray) -> Dict[str, np.ndarray]:
    """``fields`` of the records ``rows`` of ``table``, one array per field: a fancy
    index of the padded records themselves would copy them field by field, slower."""
    return {f: table[f][rows] for f in fields}


def distinct(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a``, sorted: ``np.unique`` without its hash table, whose
    set-up costs more than a sort on arrays of a few hundred values."""
    s = np.sort(a)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if len(s) else s
