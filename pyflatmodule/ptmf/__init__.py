"""PyTorch Mobile flatbuffer models (PTMF: ``.ptl``, ``.ff``): the index the C core
builds, the values, objects, functions and tensors decoded from it, and ``Module``."""
from typing import TYPE_CHECKING

from ..core.lazy import lazy_exports

if TYPE_CHECKING:
    from .functions import Argument, Function, Methods, Operator, Schema, short
    from .index import ObjectType
    from .module import Module, VerifyReport, open_module, verify_module
    from .tensors import TensorRecord
    from .values import Device, EnumValue, Object, TensorKey

#: Where each public name is defined, imported when first read.
__getattr__, __dir__ = lazy_exports(__name__, {
    ".functions": ("Argument", "Function", "Methods", "Operator", "Schema", "short"),
    ".index": ("ObjectType",),
    ".module": ("Module", "VerifyReport", "open_module", "verify_module"),
    ".tensors": ("TensorRecord",),
    ".values": ("Device", "EnumValue", "Object", "TensorKey"),
})

__all__ = ["Argument", "Device", "EnumValue", "Function", "Methods", "Module", "Object",
           "ObjectType", "Operator", "Schema", "TensorKey", "TensorRecord", "VerifyReport",
           "open_module", "short", "verify_module"]
