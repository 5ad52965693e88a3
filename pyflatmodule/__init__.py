"""pyflatmodule: open PyTorch's on-device model files without torch.

ExecuTorch programs (``.pte``), their data files (``.ptd``), ETDump profiles, bundled
programs and ETRecords, and PyTorch Mobile flatbuffer models (PTMF: ``.ptl``/``.ff``). A
small C core verifies every offset, index and tensor extent once and indexes the file;
proxies decode values lazily; tensor storage is memory-mapped straight into read-only numpy
arrays.
``load`` takes any of them and returns a Program, DataFile, ETDump, BundledProgram,
ETRecord or Module; ``load_program``, ``load_data`` and ``load_module`` return their kind only.

A PTMF module's values decode to Python's own types (None, bool, int, float, complex,
str, list, tuple, dict) and: tensors to read-only numpy arrays or QuantizedTensor,
objects to Object, functions to Function, devices to Device, enum constants to
EnumValue. A dict with tensor keys (TorchScript's ``Dict[Tensor, V]``) is keyed by
TensorKey, whose ``value`` is the tensor, hashed by identity as torch hashes tensors.

    >>> import pyflatmodule as pfm
    >>> with pfm.load("model.pte") as p:
    ...     weights = p.state_dict()

``load`` also takes a URL (``https://``, or any fsspec URL: ``s3://``, ``hf://``...): a
remote program is read from its header and flatbuffer, its weights fetched by byte range
when first read (:class:`RemoteFile`).
"""
from typing import TYPE_CHECKING

from .core.lazy import lazy_exports
from .errors import FormatError, RemoteError

if TYPE_CHECKING:
    from .core.dtypes import QuantizedTensor
    from .core.remote import RemoteFile, RemoteStats
    from .executorch import (
        BundledProgram,
        DataFile,
        ETDump,
        ETRecord,
        Method,
        Program,
        StoredTensor,
        TensorSpec,
    )
    from .files import (
                        load,
                        load_bundled,
                        load_data,
                        load_etdump,
                        load_etrecord,
                        load_module,
                        load_program,
                        verify,
    )
    from .ptmf import (
                       Argument,
                       Device,
                       EnumValue,
                       Function,
                       Methods,
                       Module,
                       Object,
                       ObjectType,
                       Operator,
                       Schema,
                       TensorKey,
                       TensorRecord,
                       VerifyReport,
    )

#: Where each public name is defined: imported when first read (``import pyflatmodule``
#: loads no format's code until a file of it is opened).
__getattr__, __dir__ = lazy_exports(__name__, {
    ".core.dtypes": ("QuantizedTensor",),
    ".core.remote": ("RemoteFile", "RemoteStats"),
    ".executorch": ("BundledProgram", "DataFile", "ETDump", "ETRecord", "Method", "Program",
                    "StoredTensor", "TensorSpec"),
    ".files": ("load", "load_bundled", "load_data", "load_etdump", "load_etrecord",
               "load_module", "load_program", "verify"),
    ".ptmf": ("Argument", "Device", "EnumValue", "Function", "Methods", "Module", "Object",
              "ObjectType", "Operator", "Schema", "TensorKey", "TensorRecord", "VerifyReport"),
})

__version__ = "0.1.0"

__all__ = [
    "Argument", "BundledProgram", "DataFile", "Device", "ETDump", "ETRecord", "EnumValue",
    "FormatError", "Function", "Method", "Methods", "Module", "Object", "ObjectType", "Operator",
    "Program", "QuantizedTensor", "RemoteError", "RemoteFile", "RemoteStats", "Schema",
    "StoredTensor", "TensorKey", "TensorRecord", "TensorSpec", "VerifyReport", "load",
    "load_bundled", "load_data", "load_etdump", "load_etrecord", "load_module", "load_program",
    "verify",
]
