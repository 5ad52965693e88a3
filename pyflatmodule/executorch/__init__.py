"""ExecuTorch programs (``.pte``) and data files (``.ptd``), zero-copy and verified.

``pyflatmodule.load`` returns a :class:`Program` for a file whose identifier is ``ET12``
and a :class:`DataFile` for ``FT01``. The C core checks the whole file when it is opened:
its structure by the project's schemas (csrc/schemas/executorch_program.fbs,
executorch_flat_tensor.fbs), then every reference the runtime follows (values,
operators, delegates, segments, constant and planned tensor extents, dim_order), with
64-bit segment offsets. Everything here then reads the verified bytes lazily: values
decode when asked for; constant tensors are read-only numpy views of the mapping with
the strides their ``dim_order`` gives; delegate payloads and named data are read-only
``memoryview``s of it. A delegate whose backend has a reader
(:mod:`pyflatmodule.executorch.backends`: XNNPACK's, :mod:`~.backends.xnnpack`, with
csrc/backends/xnnpack/) has its payload checked too and read through ``Delegate.graph``;
``Program.state_dict()`` includes the graphs' constants in torch's layout
(``Program.delegate_layouts()`` says how the backend keeps
them). ``Program.regions()`` and ``DataFile.regions()`` say where the file's bytes go
(:mod:`pyflatmodule.executorch.regions`). Bundled programs (``.bpte``), a program with
its test cases, open as a :class:`BundledProgram` (:mod:`pyflatmodule.executorch.bundled`).
ETDump profiles (``.etdump``), what the runtime records of its runs, open as an
:class:`ETDump` (:mod:`pyflatmodule.executorch.etdump`); :func:`timings` sums up their
timings per instruction (:mod:`pyflatmodule.executorch.profile`). ETRecords, what
ExecuTorch's devtools keep of a program's making (a zip of JSON graphs, maps and torch.save
archives), open as an :class:`ETRecord` (:mod:`pyflatmodule.executorch.etrecord`).
"""
from typing import TYPE_CHECKING

from ..core.lazy import lazy_exports

if TYPE_CHECKING:
    from .backends import BACKENDS, Backend, DelegateGraph, backend_of, described_as
    from .backends.coreai import CoreAIFile, CoreAIManifest
    from .backends.coreml import CmlFeature, CmlNode, CmlValue, CoreMLGraph
    from .backends.ethosu import VelaBlock, VelaIO, VelaStream
    from .backends.native import NativeGraph, NativeNode, NativeValue
    from .backends.openvino import OpenvinoGraph, OvNode, OvValue
    from .backends.qnn import QnnContext
    from .backends.tosa import TosaBlock, TosaGraph, TosaNode, TosaValue
    from .backends.vulkan import VkNode, VkValue, VulkanGraph
    from .backends.xnnpack import Quantization, XnnGraph, XnnNode, XnnValue
    from .bundled import BundledProgram, TestCase, TestSuite, TestSuites, open_bundled
    from .data_file import DataFile
    from .etdump import (
        AllocationEvent,
        DebugEvent,
        DebugTensor,
        ETDump,
        ProfileEvent,
        RunData,
        open_etdump,
    )
    from .etrecord import ETRecord, Graph, InputSpec, OutputSpec, Signature, open_etrecord
    from .etrecord import Member as ETRecordMember
    from .etrecord import Node as GraphNode
    from .file import NamedData, StoredTensor
    from .loader import open_executorch
    from .memory import MemoryPlan, PlannedTensor
    from .minimum_runtime import MinimumRuntime
    from .native_code import NativeImage, describe_native_code, refuse_native_code
    from .profile import (
        ROWS_BY,
        BlockProfile,
        InstructionProfile,
        Row,
        Timing,
        module_rows,
        record_method,
        record_nodes,
        rows,
        run_total,
        timings,
    )
    from .program import (
        Chain,
        Delegate,
        DelegateCall,
        DelegateConstant,
        Frame,
        FreeCall,
        Instruction,
        JumpFalseCall,
        KernelCall,
        Method,
        MoveCall,
        Operator,
        Program,
        TensorSpec,
        ValueMeta,
        operands,
    )
    from .regions import ExtendedHeader, Region

#: Where each public name is defined, imported when first read: a program's open loads
#: no profile, ETRecord or backend reader it does not use.
__getattr__, __dir__ = lazy_exports(__name__, {
    ".backends": ("BACKENDS", "Backend", "DelegateGraph", "backend_of", "described_as"),
    ".backends.coreai": ("CoreAIFile", "CoreAIManifest"),
    ".backends.coreml": ("CmlFeature", "CmlNode", "CmlValue", "CoreMLGraph"),
    ".backends.ethosu": ("VelaBlock", "VelaIO", "VelaStream"),
    ".backends.native": ("NativeGraph", "NativeNode", "NativeValue"),
    ".backends.openvino": ("OpenvinoGraph", "OvNode", "OvValue"),
    ".backends.qnn": ("QnnContext",),
    ".backends.tosa": ("TosaBlock", "TosaGraph", "TosaNode", "TosaValue"),
    ".backends.vulkan": ("VkNode", "VkValue", "VulkanGraph"),
    ".backends.xnnpack": ("Quantization", "XnnGraph", "XnnNode", "XnnValue"),
    ".bundled": ("BundledProgram", "TestCase", "TestSuite", "TestSuites", "open_bundled"),
    ".data_file": ("DataFile",),
    ".etdump": ("AllocationEvent", "DebugEvent", "DebugTensor", "ETDump", "ProfileEvent",
                "RunData", "open_etdump"),
    ".etrecord": ("ETRecord", "Graph", "InputSpec", "OutputSpec", "Signature", "open_etrecord",
                  "Member as ETRecordMember", "Node as GraphNode"),
    ".file": ("NamedData", "StoredTensor"),
    ".loader": ("open_executorch",),
    ".memory": ("MemoryPlan", "PlannedTensor"),
    ".minimum_runtime": ("MinimumRuntime",),
    ".native_code": ("NativeImage", "describe_native_code", "refuse_native_code"),
    ".profile": ("ROWS_BY", "BlockProfile", "InstructionProfile", "Row", "Timing",
                 "module_rows", "record_method", "record_nodes", "rows", "run_total",
                 "timings"),
    ".program": ("Chain", "Delegate", "DelegateCall", "DelegateConstant", "Frame", "FreeCall",
                 "Instruction", "JumpFalseCall", "KernelCall", "Method", "MoveCall", "Operator",
                 "Program", "TensorSpec", "ValueMeta", "operands"),
    ".regions": ("ExtendedHeader", "Region"),
})

__all__ = ["AllocationEvent", "BACKENDS", "Backend", "BlockProfile", "BundledProgram", "Chain",
           "CmlFeature", "CmlNode", "CmlValue", "CoreAIFile", "CoreAIManifest", "CoreMLGraph",
           "DataFile", "DebugEvent",
           "DebugTensor", "Delegate", "DelegateCall", "DelegateConstant", "DelegateGraph", "ETDump",
           "ETRecord", "ETRecordMember", "ExtendedHeader", "Frame", "FreeCall", "Graph",
           "GraphNode", "InputSpec", "Instruction", "InstructionProfile", "JumpFalseCall",
           "KernelCall", "MemoryPlan", "Method", "MinimumRuntime", "MoveCall", "NamedData",
           "NativeGraph", "NativeImage", "NativeNode", "NativeValue", "OpenvinoGraph", "Operator",
           "OutputSpec", "OvNode", "OvValue", "PlannedTensor", "ProfileEvent", "Program",
           "QnnContext", "Quantization", "ROWS_BY", "Region", "Row", "RunData", "Signature",
           "StoredTensor", "TensorSpec", "TestCase", "TestSuite", "TestSuites", "Timing",
           "TosaBlock", "TosaGraph", "TosaNode", "TosaValue", "ValueMeta", "VelaBlock", "VelaIO",
           "VelaStream", "VkNode", "VkValue", "VulkanGraph", "XnnGraph", "XnnNode", "XnnValue",
           "backend_of", "describe_native_code", "described_as", "module_rows", "open_bundled",
           "open_etdump", "open_etrecord", "open_executorch", "operands", "record_method",
           "record_nodes", "refuse_native_code", "rows", "run_total", "timings"]
