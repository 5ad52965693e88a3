#!/usr/bin/env python3
"""Regenerate the ExecuTorch test files in tests/data/et/ (needs torch 2.13, executorch 1.5.1).

    python tests/data/make_et_data.py [--only NAME,NAME]

For every program NAME it writes, each step in a child process (ExecuTorch may crash):

- ``NAME.pte`` (and for ``external`` the data file ``NAME.ptd``), written by ExecuTorch;
  ``sample.pte`` is also copied to ``pyflatmodule/data/``, the package's sample program;
- ``NAME.oracle.json`` + ``NAME.oracle.npz``: what ExecuTorch's own readers say of it:
  ``header`` (its extended-header reader), ``program`` (its flatbuffer reader, before it
  moves the segments back into the program: segments, constant_segment offsets, named
  data), ``restored`` (``deserialize_pte_binary``: the constant buffers and named data it
  cuts out of the segments, bytes in the npz), ``weights`` (the exported module's own
  tensors by fully qualified name), ``runtime`` (the C++ runtime's method names and
  metadata, or ``{"error": ...}``); for a ``.ptd``, ``data_file`` (its header and flat
  tensor reader: segments, named data with layouts).

The ``xnn_*`` programs are lowered to XNNPACK (fp32, fp16, 8-bit quantized through
torchao's pt2e flow with XNNPACKQuantizer, per tensor and per channel, and an attention
block); their oracles add ``xnnpack``: per XNNPACK delegate, ExecuTorch's own reading of
the payload (``XNNHeader.from_bytes``, and the flatbuffer decoded by ExecuTorch's flatc
with ExecuTorch's schema.fbs, as JSON), and for the quantized ones ``weights`` are the
converted module's (the int8 weights torch quantized, with their scales) plus
``dequantize``: each quantized weight's parameters as the graph's dequantize node has them.
``vulkan`` is the sample network lowered to Vulkan; its oracle adds ``vulkan``: per Vulkan
delegate, ExecuTorch's header reader (``VulkanDelegateHeader.from_bytes``) and its reading
of the graph (``flatbuffer_to_vk_graph``), as JSON. ``coreml`` (the sample network) and
``coreml_mlp`` are lowered to Core ML; their oracle adds ``coreml``: per Core ML delegate,
the files ExecuTorch's own inmemoryfs unflattens the payload into
(``executorchcoreml.unflatten_directory_contents``, their SHA-256) and coremltools'
reading of the package (``MLModel(skip_model_load=True).get_spec()``: version, inputs,
outputs, the main block's operations; each const operation's value, by coremltools'
``BlobReader`` or the spec's protobuf, in the npz). The ``native_*`` programs (an MLP, a
conv net, an attention block, an fp16 MLP, a network whose bucketize stays a portable
kernel between two delegates, a linear layer adding into a buffer it does not save) are
lowered to ExecuTorch's native backend (``NativePartitioner(external_constants_tag=None)``:
the constants in the program's named data; ``native_external``, the MLP, with the
partitioner's default tag: its constants in the data file ``native_external.ptd``); their
oracle adds ``native``: per native delegate, ExecuTorch's reading of the payload
(``deserialize_program``, into its schema's dataclasses), as JSON; the constants' bytes
are ``restored``'s named data (``data_file``'s for ``native_external``).
"""
import json
import linecache
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from typing import Any, Callable, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "et")
#: The sample program the package ships (the same bytes as et/sample.pte).
SAMPLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "pyflatmodule", "data",
                      "sample.pte")
TIMEOUT = 900.0

warnings.filterwarnings("ignore")


# ----------------------------------------------------------------- models (child only)

def _models() -> Dict[str, Callable[[], Tuple[Any, Any]]]:
    import torch
    from torch import nn

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l1 = nn.Linear(4, 8)
            self.l2 = nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.l2(torch.relu(self.l1(x)))

    class Counter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("count", torch.zeros(2, 3))
            self.scale = nn.Parameter(torch.arange(6, dtype=torch.float32).reshape(2, 3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.count.add_(x)
            return self.count * self.scale

    class Dyn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l1 = nn.Linear(5, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.l1(x).sum(dim=0)

    class ChannelsLast(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.conv(x.to(memory_format=torch.channels_last))

    # ExecuTorch records each frame's file name in the program's stack traces: Cond's
    # source is compiled under a fixed name, so the file does not depend on the checkout.
    cond_file = "make_et_data.py:Cond"
    cond_source = (
        "class Cond(nn.Module):\n"
        "    def __init__(self) -> None:\n"
        "        super().__init__()\n"
        "        self.l1 = nn.Linear(4, 4)\n"
        "\n"
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        "        return torch.cond(x.sum() > 0, lambda y: self.l1(y), lambda y: y - 1.0, (x,))\n")
    linecache.cache[cond_file] = (len(cond_source), None, cond_source.splitlines(True),
                                  cond_file)
    scope: Dict[str, Any] = {"nn": nn, "torch": torch}
    exec(compile(cond_source, cond_file, "exec"), scope)
    Cond = scope["Cond"]

    class Cache(nn.Module):
        """A mutable buffer with non-zero initial values."""

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("cache", torch.arange(6, dtype=torch.float32).reshape(2, 3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.cache.add_(x)
            return self.cache * 2.0

    class SampleNet(nn.Module):
        """The package's sample program (pyflatmodule/data/sample.pte)."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.classifier = nn.Linear(8, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = torch.relu(self.conv(x)).mean(dim=(2, 3))
            return self.classifier(x).softmax(dim=-1)

    def seeded(cls: Callable[[], nn.Module]) -> nn.Module:
        torch.manual_seed(0)
        return cls().eval()

    x4 = (torch.randn(2, 4),)

    def mlp() -> Tuple[Any, Any]:
        m = seeded(MLP)
        return m, torch.export.export(m, x4)

    def quantized(per_channel: bool) -> Tuple[Any, Any]:
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        m = seeded(MLP)
        quantizer = XNNPACKQuantizer().set_global(
            get_symmetric_quantization_config(is_per_channel=per_channel))
        prepared = prepare_pt2e(torch.export.export(m, x4).module(), quantizer)
        for _ in range(4):
            prepared(torch.randn(2, 4))
        return m, torch.export.export(convert_pt2e(prepared), x4)

    def fp16() -> Tuple[Any, Any]:
        m = seeded(MLP).half()
        return m, torch.export.export(m, (torch.randn(2, 4).half(),))

    def cond() -> Tuple[Any, Any]:
        m = seeded(Cond)
        return m, torch.export.export(m, (torch.randn(2, 4),))

    def cache() -> Tuple[Any, Any]:
        m = seeded(Cache)
        return m, torch.export.export(m, (torch.ones(2, 3),))

    def mlp_changed() -> Tuple[Any, Any]:
        """mlp with one weight changed: l2.bias[1] += 0.5 (for diff)."""
        m = seeded(MLP)
        with torch.no_grad():
            m.l2.bias[1] += 0.5
        return m, torch.export.export(m, x4)

    def two_methods() -> Tuple[Any, Any]:
        m = seeded(MLP)
        return m, {"forward": torch.export.export(m, x4),
                   "first_layer": torch.export.export(m.l1, x4)}

    def mutable() -> Tuple[Any, Any]:
        m = seeded(Counter)
        return m, torch.export.export(m, (torch.ones(2, 3),))

    def dynamic() -> Tuple[Any, Any]:
        m = seeded(Dyn)
        batch = torch.export.Dim("batch", min=1, max=16)
        return m, torch.export.export(m, (torch.randn(3, 5),), dynamic_shapes=({0: batch},))

    def channels_last() -> Tuple[Any, Any]:
        m = seeded(ChannelsLast)
        return m, torch.export.export(m, (torch.randn(1, 2, 3, 3),))

    def sample() -> Tuple[Any, Any]:
        m = seeded(SampleNet)
        return m, torch.export.export(m, (torch.randn(1, 3, 8, 8),))

    return {"sample": sample, "mlp": mlp, "mlp_changed": mlp_changed,
            "two_methods": two_methods, "mutable": mutable,
            "dynamic": dynamic, "channels_last": channels_last, "xnnpack": mlp,
            "xnnpack_changed": mlp_changed,
            "external": mlp, "xnnpack_q8": lambda: quantized(False),
            "xnnpack_q8_channel": lambda: quantized(True), "xnnpack_fp16": fp16,
            "xnnpack_inline": mlp, "inline_constants": mlp, "cond_stacktrace": cond,
            "mutable_init": cache, "xnnpack_specs": mlp, "vulkan": sample,
            "coreml": sample, "coreml_mlp": mlp}


def _config(name: str) -> Tuple[Any, str]:
    """The ExecutorchBackendConfig program `name` is written with, and how it reads."""
    from executorch.exir import ExecutorchBackendConfig
    if name == "external":
        return ExecutorchBackendConfig(external_constants=True), "external_constants=True"
    if name == "xnnpack_inline":
        return (ExecutorchBackendConfig(extract_delegate_segments=False),
                "extract_delegate_segments=False")
    if name == "cond_stacktrace":
        return ExecutorchBackendConfig(emit_stacktrace=True), "emit_stacktrace=True"
    if name == "mutable_init":
        from executorch.exir.passes import MemoryPlanningPass
        from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
        return (ExecutorchBackendConfig(
            passes=[InitializedMutableBufferPass(["cache"])], emit_mutable_buffer_names=True,
            memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True)),
            "passes=[InitializedMutableBufferPass(['cache'])], emit_mutable_buffer_names=True, "
            "memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True)")
    return ExecutorchBackendConfig(), ""


def _write(name: str) -> Dict[str, Any]:
    """Exports and lowers program `name`, writes its files; returns how."""
    from executorch.exir import to_edge, to_edge_transform_and_lower
    if name in XNN_NAMES:
        return _xnn_write(name)
    if name in NATIVE_NAMES:
        return _native_write(name)
    module, exported = _models()[name]()
    if name.startswith("xnnpack"):
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        partitioner = XnnpackPartitioner()
        how = "to_edge_transform_and_lower(partitioner=[XnnpackPartitioner()])"
        if name == "xnnpack_specs":   # the delegate carries compile specs
            from executorch.exir.backend.compile_spec_schema import CompileSpec
            from executorch.exir.backend.partitioner import DelegationSpec
            partitioner.delegation_spec = DelegationSpec("XnnpackBackend", [
                CompileSpec("dqlinear_partitioner", b""), CompileSpec("origin", b"tests")])
            how += (" with delegation_spec DelegationSpec('XnnpackBackend', [CompileSpec("
                    "'dqlinear_partitioner', b''), CompileSpec('origin', b'tests')])")
        edge = to_edge_transform_and_lower(exported, partitioner=[partitioner])
    elif name.startswith("coreml"):
        from executorch.backends.apple.coreml.partition import CoreMLPartitioner
        edge = to_edge_transform_and_lower(exported, partitioner=[CoreMLPartitioner()])
        how = "to_edge_transform_and_lower(partitioner=[CoreMLPartitioner()])"
    elif name == "vulkan":
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
        edge = to_edge_transform_and_lower(exported, partitioner=[VulkanPartitioner()])
        how = "to_edge_transform_and_lower(partitioner=[VulkanPartitioner()])"
    else:
        edge = to_edge(exported)
        how = "to_edge(...)"
    config, said = _config(name)
    prog = edge.to_executorch(config)
    how += f".to_executorch(ExecutorchBackendConfig({said}))"
    with open(os.path.join(OUT, name + ".pte"), "wb") as f:
        if name == "inline_constants":
            # The constants inline in the flatbuffer (Program.constant_buffer), as ExecuTorch
            # wrote programs before the constant segment: its own flatbuffer writer, without
            # serialize_pte_binary's step that moves them into a segment.
            from executorch.exir._serialize._flatbuffer_program import _program_to_flatbuffer
            f.write(_program_to_flatbuffer(prog.executorch_program).data)
            how += " then exir._serialize._flatbuffer_program._program_to_flatbuffer(" \
                   "executorch_program) (inline constant_buffer, no segments)"
        else:
            prog.write_to_file(f)
    if name == "sample":
        shutil.copyfile(os.path.join(OUT, name + ".pte"), SAMPLE)
    if name == "external":
        how += " + write_tensor_data_to_file (wrote " + _write_data_file(prog, name) + ")"
    state = module.state_dict() if name != "mutable" else dict(module.named_buffers(),
                                                                **dict(module.named_parameters()))
    return {"writer": how, "weights": {k: v for k, v in state.items()}}


def _write_data_file(prog: Any, name: str) -> str:
    """Writes the program's one data file as ``NAME.ptd``; returns the name ExecuTorch
    gave it."""
    with tempfile.TemporaryDirectory() as d:
        prog.write_tensor_data_to_file(d)
        written = os.listdir(d)
        assert len(written) == 1, written
        with open(os.path.join(d, written[0]), "rb") as src, \
                open(os.path.join(OUT, name + ".ptd"), "wb") as dst:
            dst.write(src.read())
    return str(written[0])


# ------------------------------------------------------------------ oracle (child only)

class _Arrays:
    def __init__(self) -> None:
        self.arrays: Dict[str, Any] = {}

    def put(self, key: str, data: bytes) -> str:
        import numpy as np
        self.arrays[key] = np.frombuffer(bytes(data), dtype=np.uint8)
        return key


def _kind(obj: Any) -> str:
    return type(obj).__name__


def _tensor(t: Any) -> Dict[str, Any]:
    info = t.extra_tensor_info
    alloc = t.allocation_info
    return {"scalar_type": int(t.scalar_type), "sizes": list(t.sizes),
            "dim_order": list(t.dim_order), "data_buffer_idx": t.data_buffer_idx,
            "storage_offset": t.storage_offset, "shape_dynamism": int(t.shape_dynamism),
            "allocation": None if alloc is None else [
                alloc.memory_id, alloc.memory_offset_low, alloc.memory_offset_high],
            "fqn": None if info is None else info.fully_qualified_name,
            "location": None if info is None else int(info.location)}


def _args(instr: Any) -> List[int]:
    """An instruction's integer fields in the schema's order."""
    import dataclasses
    out: List[int] = []
    for f in dataclasses.fields(instr):
        v = getattr(instr, f.name)
        out += list(v) if isinstance(v, list) else [int(v)]
    return out


def _plan(plan: Any) -> Dict[str, Any]:
    values = []
    for v in plan.values:
        entry: Dict[str, Any] = {"kind": _kind(v.val)}
        if entry["kind"] == "Tensor":
            entry.update(_tensor(v.val))
        elif entry["kind"] in ("Int", "Bool", "Double", "String"):
            entry["value"] = getattr(v.val, entry["kind"].lower() + "_val")
        elif entry["kind"] in ("IntList", "TensorList", "BoolList", "OptionalTensorList"):
            entry["items"] = list(v.val.items)
        values.append(entry)
    return {
        "name": plan.name, "inputs": list(plan.inputs), "outputs": list(plan.outputs),
        "values": values,
        "operators": [[op.name, op.overload] for op in plan.operators],
        "chains": [{"inputs": list(c.inputs), "outputs": list(c.outputs),
                    "instructions": [_kind(i.instr_args) for i in c.instructions],
                    "args": [_args(i.instr_args) for i in c.instructions],
                    "stacktrace": None if c.stacktrace is None else [
                        [[f.filename, f.lineno, f.name, f.context] for f in frames.items]
                        for frames in c.stacktrace]}
                   for c in plan.chains],
        "delegates": [{"id": d.id, "location": int(d.processed.location),
                       "index": d.processed.index,
                       "compile_specs": [[s.key, bytes(s.value).hex()] for s in d.compile_specs]}
                      for d in plan.delegates],
        "non_const_buffer_sizes": list(plan.non_const_buffer_sizes)}


def _oracle_pte(path: str, arrays: _Arrays) -> Dict[str, Any]:
    from executorch.exir._serialize import _program as P
    with open(path, "rb") as f:
        data = f.read()
    eh = P._get_extended_header(data)   # None: no segments follow the flatbuffer
    raw = P._flatbuffer_to_program(data[:eh.program_size] if eh else data)
    program = {
        "version": raw.version,
        "execution_plan": [_plan(p) for p in raw.execution_plan],
        "constant_buffer_count": len(raw.constant_buffer or []),
        "backend_delegate_data_count": len(raw.backend_delegate_data or []),
        "segments": [[s.offset, s.size] for s in (raw.segments or [])],
        "constant_segment": None if raw.constant_segment is None else {
            "segment_index": raw.constant_segment.segment_index,
            "offsets": list(raw.constant_segment.offsets)},
        "mutable_data_segments": [{"segment_index": m.segment_index, "offsets": list(m.offsets)}
                                  for m in (raw.mutable_data_segments or [])],
        "named_data": [[n.key, n.segment_index] for n in (raw.named_data or [])]}
    pte = P.deserialize_pte_binary(data)
    restored: Dict[str, Any] = {
        "constant_buffer": [arrays.put(f"constant_buffer/{i}", b.storage)
                            for i, b in enumerate(pte.program.constant_buffer)],
        "mutable_data": [arrays.put(f"mutable_data/{i}", b.storage)
                         for i, b in enumerate(pte.mutable_data or [])],
        "named_data": {}}
    if pte.named_data is not None:
        store = pte.named_data
        for key, entry in store.pte_data.items():
            restored["named_data"][key] = arrays.put(
                "named_data/" + key, store.buffers[entry.buffer_index])
    return {"header": None if eh is None else {
                "length": eh.length, "program_size": eh.program_size,
                "segment_base_offset": eh.segment_base_offset,
                "segment_data_size": eh.segment_data_size},
            "program": program, "restored": restored}


def _oracle_ptd(path: str) -> Dict[str, Any]:
    from executorch.extension.flat_tensor.serialize import serialize as S
    with open(path, "rb") as f:
        data = f.read()
    h = S._get_extended_header(data)
    assert h is not None
    ft = S._deserialize_to_flat_tensor(data)
    return {"header": {"length": h.length, "flatbuffer_offset": h.flatbuffer_offset,
                       "flatbuffer_size": h.flatbuffer_size,
                       "segment_base_offset": h.segment_base_offset,
                       "segment_data_size": h.segment_data_size},
            "version": ft.version,
            "segments": [[s.offset, s.size] for s in ft.segments],
            "named_data": [{"key": n.key, "segment_index": n.segment_index,
                            "scalar_type": int(n.tensor_layout.scalar_type),
                            "sizes": list(n.tensor_layout.sizes),
                            "dim_order": list(n.tensor_layout.dim_order)}
                           for n in ft.named_data]}


def _runtime(path: str) -> Dict[str, Any]:
    from executorch.runtime import Runtime
    program = Runtime.get().load_program(path)
    out: Dict[str, Any] = {"method_names": sorted(program.method_names), "methods": {}}
    for name in sorted(program.method_names):
        meta = program.metadata(name)

        def infos(get: Callable[[int], Any], n: int) -> List[Dict[str, Any]]:
            return [{"dtype": int(get(i).dtype()), "sizes": list(get(i).sizes()),
                     "nbytes": get(i).nbytes(), "memory_planned": get(i).is_memory_planned()}
                    for i in range(n)]
        out["methods"][name] = {
            "inputs": infos(meta.input_tensor_meta, meta.num_inputs()),
            "outputs": infos(meta.output_tensor_meta, meta.num_outputs())}
    return out


# ------------------------------------------------- XNNPACK-lowered programs (child only)

#: Programs lowered to XNNPACK whose payloads tests/backends/test_xnnpack.py reads.
XNN_NAMES = ["xnn_conv", "xnn_fp16", "xnn_q8_per_tensor", "xnn_q8_per_channel",
             "xnn_attention", "xnn_q4_group", "xnn_layouts", "xnn_layouts_fp16",
             "xnn_conv_bn", "xnn_conv1d"]


def _xnn_module(name: str) -> Tuple[Any, Tuple[Any, ...]]:
    import torch
    from torch import nn

    class ConvNet(nn.Module):
        """A conv, a depthwise conv and a linear layer."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.dw = nn.Conv2d(8, 8, 3, groups=8)
            self.fc = nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.dw(torch.relu(self.conv(x))))
            return self.fc(y.mean(dim=(2, 3)))

    class Attention(nn.Module):
        """Multi-head self-attention and a projection."""

        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
            self.out = nn.Linear(16, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a, _ = self.attn(x, x, x, need_weights=False)
            return self.out(a)

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(64, 32)
            self.b = nn.Linear(32, 8, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(torch.relu(self.a(x)))

    class Layouts(nn.Module):
        """Every filter layout XNNPACK has: a conv, a conv of one input channel (a
        depthwise conv to XNNPACK), a depthwise conv with two outputs per channel, a
        transposed conv, a grouped transposed conv and a linear layer; kernels not
        square, so that a height and width swapped show."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, (3, 2), padding=1)
            self.single = nn.Conv2d(1, 3, (2, 3), padding=1)
            self.dw = nn.Conv2d(4, 8, (2, 3), groups=4, padding=1)
            self.up = nn.ConvTranspose2d(8, 6, (3, 2), stride=2)
            self.upg = nn.ConvTranspose2d(6, 4, (2, 3), groups=2)
            self.fc = nn.Linear(4, 5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.conv(x)) + self.single(x[:, :1])[:, :1].mean()
            y = self.upg(torch.relu(self.up(torch.relu(self.dw(y)))))
            return self.fc(y.mean(dim=(2, 3)))

    class ConvBN(nn.Module):
        """Batch norms after a conv without bias and after a linear layer (the
        partitioner folds each into the layer before it)."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.fc = nn.Linear(4, 3)
            self.bn1 = nn.BatchNorm1d(3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3))
            return self.bn1(self.fc(y))

    class Conv1d(nn.Module):
        """A 1-d conv and a depthwise one (lowered as 2-d convs of kernel width 1)."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(3, 4, 3, padding=1)
            self.dw = nn.Conv1d(4, 4, 2, groups=4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.dw(torch.relu(self.conv(x)))

    torch.manual_seed(0)
    if name == "xnn_conv1d":
        return Conv1d().eval(), (torch.randn(1, 3, 8),)
    if name == "xnn_conv_bn":
        m = ConvBN().eval()
        with torch.no_grad():   # statistics far from 0 and 1, so that folding shows
            for bn in (m.bn, m.bn1):
                bn.running_mean.uniform_(-1, 1)
                bn.running_var.uniform_(0.5, 2)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-1, 1)
        return m, (torch.randn(1, 3, 6, 6),)
    if name.startswith("xnn_layouts"):
        m = Layouts().eval()
        x = torch.randn(1, 3, 5, 6)
        return (m.half(), (x.half(),)) if name == "xnn_layouts_fp16" else (m, (x,))
    if name == "xnn_attention":
        return Attention().eval(), (torch.randn(1, 5, 16),)
    if name == "xnn_q4_group":
        return MLP().eval(), (torch.randn(2, 64),)
    m = ConvNet().eval()
    x = torch.randn(1, 3, 6, 6)
    if name == "xnn_fp16":
        return m.half(), (x.half(),)
    return m, (x,)


def _xnn_write(name: str) -> Dict[str, Any]:
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    module, args = _xnn_module(name)
    how = "to_edge_transform_and_lower(partitioner=[XnnpackPartitioner()]).to_executorch()"
    state: Dict[str, Any] = dict(module.state_dict())
    dequantize: Dict[str, Any] = {}
    if name.startswith("xnn_q8_"):
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(
            is_per_channel=name == "xnn_q8_per_channel"))
        prepared = prepare_pt2e(torch.export.export(module, args).module(), quantizer)
        prepared(*args)
        module = convert_pt2e(prepared)
        how = ("torchao prepare_pt2e/convert_pt2e(XNNPACKQuantizer, get_symmetric_"
               f"quantization_config(is_per_channel={name == 'xnn_q8_per_channel'})), " + how)
        state = dict(module.named_parameters(), **dict(module.named_buffers()))
        for node in module.graph.nodes:   # the parameters each int8 weight is read with
            if "dequantize" in str(node.target) and node.args[0].op == "get_attr":
                a = [x.target if hasattr(x, "target") else x for x in node.args]
                dequantize[a[0]] = {"op": str(node.target), "scale": a[1], "zero_point": a[2],
                                    "axis": a[3] if "per_channel" in str(node.target) else None}
    if name == "xnn_q4_group":   # int4 weights in groups of 32, int8 dynamic activations
        from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
        from torchao.quantization.granularity import PerGroup
        quantize_(module, Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=PerGroup(32)))
        how = ("torchao quantize_(Int8DynamicActivationIntxWeightConfig(weight_dtype=int4, "
               "weight_granularity=PerGroup(32))), " + how)
        state = {}
        for layer in ("a", "b"):   # the int4 values torchao made (one int8 each), scales
            w = getattr(module, layer).weight
            state[layer + ".weight.qdata"], state[layer + ".weight.scale"] = w.qdata, w.scale
            assert not w.zero_point.any()
            dequantize[layer + ".weight.qdata"] = {"op": "int4 per group", "scale":
                                                   layer + ".weight.scale", "zero_point": 0,
                                                   "axis": 0, "group_size": 32}
        state["a.bias"] = module.a.bias
    folded: Dict[str, Any] = {}
    if name == "xnn_conv_bn":   # what folding makes, by the function the partitioner calls
        from torch.nn.utils.fusion import fuse_conv_bn_weights, fuse_linear_bn_weights
        for layer, bn, fuse in (("conv", module.bn, fuse_conv_bn_weights),
                                ("fc", module.bn1, fuse_linear_bn_weights)):
            lin = getattr(module, layer)
            w, b = fuse(lin.weight, lin.bias, bn.running_mean, bn.running_var, bn.eps,
                        bn.weight, bn.bias)
            folded[layer + ".weight"], folded[layer + ".bias"] = w, b
    edge = to_edge_transform_and_lower(torch.export.export(module, args),
                                       partitioner=[XnnpackPartitioner()])
    with open(os.path.join(OUT, name + ".pte"), "wb") as f:
        edge.to_executorch().write_to_file(f)
    return {"writer": how, "weights": state, "dequantize": dequantize, "folded": folded}


# ------------------------------------------------ natively lowered programs (child only)

#: Programs lowered to ExecuTorch's native backend (``NativePartitioner``) whose payloads
#: tests/backends/test_native.py reads.
NATIVE_NAMES = ["native_mlp", "native_conv", "native_attention", "native_fp16",
                "native_partial", "native_cache", "native_external"]


def _native_module(name: str) -> Tuple[Any, Tuple[Any, ...]]:
    import torch
    from torch import nn

    class Bucketed(nn.Module):
        """Two linears with a bucketize between them, an op the native backend does not
        take (not core ATen): two delegates and a portable kernel."""

        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Linear(4, 8)
            self.second = nn.Linear(8, 3)
            self.register_buffer("edges", torch.tensor([-1.0, 0.0, 1.0]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.second(torch.bucketize(self.first(x), self.edges).float())

    class Cache(nn.Module):
        """A linear layer and a buffer it does not save (persistent=False), updated in
        place: the method's mutable buffer, zero at load."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(4, 4)
            self.register_buffer("cache", torch.zeros(2, 4), persistent=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.cache.add_(self.proj(x))
            return self.cache + 1.0

    if name == "native_attention":
        return _xnn_module("xnn_attention")
    if name == "native_conv":
        return _xnn_module("xnn_conv")
    torch.manual_seed(0)
    if name == "native_partial":
        return Bucketed().eval(), (torch.randn(2, 4),)
    if name == "native_cache":
        return Cache().eval(), (torch.randn(2, 4),)
    module, exported = _models()["mlp"]()
    args = tuple(exported.example_inputs[0])
    if name == "native_fp16":
        return module.half(), tuple(a.half() for a in args)
    return module, args


def native_lower(module: Any, args: Tuple[Any, ...], external: bool = False) -> Tuple[Any, str]:
    """``module`` exported with ``args`` and lowered to the native backend, its constants
    in the program's named data (or, ``external``, the partitioner's default tag: in a
    data file): the ExecuTorch program manager, and how it was made."""
    import torch
    from executorch.backends.native import get_default_compile_config, get_default_passes
    from executorch.backends.native.partitioner import NativePartitioner
    from executorch.exir import to_edge_transform_and_lower
    said = "" if external else "external_constants_tag=None"
    partitioner = NativePartitioner() if external else \
        NativePartitioner(external_constants_tag=None)
    edge = to_edge_transform_and_lower(
        torch.export.export(module, args), transform_passes=get_default_passes(),
        partitioner=[partitioner], compile_config=get_default_compile_config())
    return edge.to_executorch(), (
        f"to_edge_transform_and_lower(transform_passes=get_default_passes(), "
        f"partitioner=[NativePartitioner({said})], "
        f"compile_config=get_default_compile_config()).to_executorch()")


def _native_write(name: str) -> Dict[str, Any]:
    module, args = _native_module(name)
    # native_external: the partitioner's default tag, its constants in a data file
    prog, how = native_lower(module, args, external=name == "native_external")
    with open(os.path.join(OUT, name + ".pte"), "wb") as f:
        prog.write_to_file(f)
    if name == "native_external":
        how += " + write_tensor_data_to_file (wrote " + _write_data_file(prog, name) + ")"
    return {"writer": how, "weights": dict(module.state_dict())}


def _payloads(path: str, backend: str) -> List[Tuple[str, bytes]]:
    """(method, payload) of each delegate of ``backend`` in the program, as
    ``deserialize_pte_binary`` restores them."""
    from executorch.exir._serialize import _program as P
    with open(path, "rb") as f:
        pte = P.deserialize_pte_binary(f.read())
    return [(plan.name, bytes(pte.program.backend_delegate_data[d.processed.index].data))
            for plan in pte.program.execution_plan for d in plan.delegates if d.id == backend]


def _oracle_xnnpack(path: str) -> Dict[str, Any]:
    """Per XNNPACK delegate: ExecuTorch's header reader, and its flatc's JSON of the graph."""
    from executorch.backends.xnnpack.serialization import xnnpack_graph_serialize as X
    from executorch.exir._serialize import _flatbuffer
    schema = os.path.join(os.path.dirname(X.__file__), "schema.fbs")
    out = []
    for plan, data in _payloads(path, "XnnpackBackend"):
        h = X.XNNHeader.from_bytes(data[:X.XNNHeader.EXPECTED_LENGTH])
        assert h.is_valid()
        fb = data[h.flatbuffer_offset:h.flatbuffer_offset + h.flatbuffer_size]
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "graph.bin"), "wb") as f:
                f.write(fb)
            _flatbuffer._flatc_decompile(tmp, schema, os.path.join(tmp, "graph.bin"),
                                         ["--raw-binary"])
            with open(os.path.join(tmp, "graph.json"), encoding="utf-8") as f:
                # flatc writes infinities (a clamp's unset bound) as bare inf
                graph = json.loads(re.sub(r'(?<![\w"])(-?)inf(?![\w"])', r"\1Infinity",
                                          f.read()))
        out.append({"plan": plan, "payload_size": len(data),
                    "header": {"flatbuffer_offset": h.flatbuffer_offset,
                               "flatbuffer_size": h.flatbuffer_size,
                               "constant_data_offset": h.constant_data_offset,
                               "constant_data_size": h.constant_data_size},
                    "graph": graph})
    return {"delegates": out}


def _oracle_coreml(path: str, arrays: _Arrays) -> Dict[str, Any]:
    """Per Core ML delegate: the files ExecuTorch's inmemoryfs unflattens its payload into,
    and coremltools' reading of the package (see the module docstring); each constant's
    bytes in ``arrays`` as ``coreml<k>/<value name>``."""
    import hashlib

    import coremltools as ct
    import numpy as np
    from coremltools.libmilstoragepython import _BlobStorageReader
    from coremltools.proto import FeatureTypes_pb2
    from executorch.backends.apple.coreml import executorchcoreml
    array_types = FeatureTypes_pb2.ArrayFeatureType.ArrayDataType
    readers = {"FLOAT16": ("read_fp16_data", "<f2"), "FLOAT32": ("read_float_data", "<f4")}
    out = []
    for k, (plan, data) in enumerate(_payloads(path, "CoreMLBackend")):
        with tempfile.TemporaryDirectory() as tmp:
            assert executorchcoreml.unflatten_directory_contents(data, tmp)
            (root,) = os.listdir(tmp)
            root = os.path.join(tmp, root)
            files = {}
            for d, _, names in os.walk(root):
                for n in names:
                    with open(os.path.join(d, n), "rb") as f:
                        rel = os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/")
                        files[rel] = hashlib.sha256(f.read()).hexdigest()
            package = os.path.join(root, "model.mlpackage")
            spec = ct.models.MLModel(package, skip_model_load=True).get_spec()
            weights = os.path.join(package, "Data", "com.apple.CoreML", "weights",
                                   "weight.bin")
            blobs = _BlobStorageReader(weights) if os.path.exists(weights) else None
            main = spec.mlProgram.functions["main"]
            block = main.block_specializations[main.opset]
            ops, constants = [], {}
            for op in block.operations:
                ops.append({"type": op.type, "outputs": [o.name for o in op.outputs]})
                if op.type != "const" or "val" not in op.attributes:
                    continue
                val, name = op.attributes["val"], op.outputs[0].name
                dtype = ct.proto.MIL_pb2.DataType.Name(val.type.tensorType.dataType)
                if val.HasField("blobFileValue"):
                    assert blobs is not None
                    read, np_dtype = readers[dtype]
                    a = np.asarray(getattr(blobs, read)(val.blobFileValue.offset))
                    a = a.view(np_dtype)
                elif val.immediateValue.tensor.HasField("bytes") and dtype == "FLOAT16":
                    a = np.frombuffer(val.immediateValue.tensor.bytes.values, "<f2")
                elif val.immediateValue.tensor.HasField("floats"):
                    a = np.array(val.immediateValue.tensor.floats.values, "<f4")
                else:
                    continue
                constants[name] = {"dtype": dtype.lower(),
                                   "array": arrays.put(f"coreml{k}/{name}", a.tobytes())}

            def feature(f: Any) -> Dict[str, Any]:
                t = f.type
                return {"name": f.name, "kind": t.WhichOneof("Type"),
                        "shape": list(t.multiArrayType.shape),
                        "dataType": array_types.Name(t.multiArrayType.dataType).lower()}
            out.append({"plan": plan, "payload_size": len(data),
                        "root": os.path.basename(root), "files": files,
                        "specification_version": spec.specificationVersion,
                        "inputs": [feature(f) for f in spec.description.input],
                        "outputs": [feature(f) for f in spec.description.output],
                        "function_inputs": [i.name for i in main.inputs],
                        "block_outputs": list(block.outputs), "operations": ops,
                        "constants": constants})
    return {"delegates": out}


def _oracle_vulkan(path: str) -> Dict[str, Any]:
    """Per Vulkan delegate: ExecuTorch's header reader and its reading of the graph
    (``flatbuffer_to_vk_graph``: its flatc with its schema.fbs), as JSON."""
    import dataclasses

    from executorch.backends.vulkan.serialization import vulkan_graph_serialize as V
    from executorch.exir._serialize._dataclass import _DataclassEncoder
    out = []
    for plan, data in _payloads(path, "VulkanBackend"):
        h = V.VulkanDelegateHeader.from_bytes(data[:V.VulkanDelegateHeader.EXPECTED_LENGTH])
        assert h.is_valid()
        graph = V.flatbuffer_to_vk_graph(V.extract_vk_flatbuffer(data))
        out.append({"plan": plan, "payload_size": len(data), "header": dataclasses.asdict(h),
                    "graph": json.loads(json.dumps(graph, cls=_DataclassEncoder))})
    return {"delegates": out}


def oracle_native(path: str) -> Dict[str, Any]:
    """Per native delegate: ExecuTorch's reading of the payload (``deserialize_program``,
    its flatc with its native_graph.fbs, into its schema's dataclasses), as JSON."""
    from executorch.backends.native.serialization import deserialize_program
    from executorch.exir._serialize._dataclass import _DataclassEncoder
    out = []
    for plan, data in _payloads(path, "NativeBackend"):
        program = deserialize_program(data)
        out.append({"plan": plan, "payload_size": len(data),
                    "identifier": data[4:8].decode(),
                    "program": json.loads(json.dumps(program, cls=_DataclassEncoder))})
    return {"delegates": out}


# --------------------------------------------------------------------------- driver

def _child(step: str, name: str, result: str) -> None:
    import numpy as np
    arrays = _Arrays()
    res: Dict[str, Any]
    if step == "write":
        w = _write(name)
        res = {"writer": w["writer"], "weights": {}, "folded": {},
               "dequantize": w.get("dequantize", {})}
        for what in ("weights", "folded"):
            for fqn, t in w.get(what, {}).items():
                t = t.detach().contiguous()
                res[what][fqn] = {"dtype": str(t.dtype).replace("torch.", ""),
                                  "shape": list(t.shape),
                                  "data": arrays.put(what + "/" + fqn, t.numpy().tobytes())}
    elif step == "pte":
        res = _oracle_pte(os.path.join(OUT, name + ".pte"), arrays)
    elif step == "ptd":
        res = _oracle_ptd(os.path.join(OUT, name + ".ptd"))
    elif step == "xnnpack":
        res = _oracle_xnnpack(os.path.join(OUT, name + ".pte"))
    elif step == "vulkan":
        res = _oracle_vulkan(os.path.join(OUT, name + ".pte"))
    elif step == "coreml":
        res = _oracle_coreml(os.path.join(OUT, name + ".pte"), arrays)
    elif step == "native":
        res = oracle_native(os.path.join(OUT, name + ".pte"))
    else:
        res = _runtime(os.path.join(OUT, name + ".pte"))
    with open(result + ".json", "w", encoding="utf-8") as f:
        json.dump(res, f)
    np.savez(result + ".npz", **arrays.arrays)


def run_child(script: str, step: str, arg: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``script --child STEP ARG OUT`` in a child process (ExecuTorch may crash): the JSON
    it wrote to OUT.json and the arrays of OUT.npz (none when it wrote none), or
    ``{"error": ...}`` with the child's exit status and last line."""
    import numpy as np
    with tempfile.TemporaryDirectory() as d:
        pre = os.path.join(d, "out")
        p = subprocess.run([sys.executable, os.path.abspath(script), "--child", step, arg,
                            pre], capture_output=True, text=True, timeout=TIMEOUT)
        if p.returncode != 0:
            lines = (p.stderr or "").strip().splitlines()
            return {"error": f"exit {p.returncode}: {lines[-1] if lines else ''}"}, {}
        with open(pre + ".json", encoding="utf-8") as f:
            res = json.load(f)
        if not os.path.exists(pre + ".npz"):
            return res, {}
        with np.load(pre + ".npz") as z:
            return res, {k: z[k] for k in z.files}


def _run(step: str, name: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    return run_child(__file__, step, name)


def make(name: str) -> None:
    """Writes program `name` and its oracle."""
    written, arrays = _run("write", name)
    if "error" in written:
        raise SystemExit(f"{name}: ExecuTorch refused to write it: {written['error']}")
    oracle: Dict[str, Any] = {"writer": written.pop("writer")}
    for step in ("pte", "runtime") + (("ptd",) if name in ("external", "native_external")
                                      else ()) + (
            ("xnnpack",) if name in XNN_NAMES else ()) + (("vulkan",) if name == "vulkan" else ()) \
            + (("coreml",) if name.startswith("coreml") else ()) \
            + (("native",) if name in NATIVE_NAMES else ()):
        res, more = _run(step, name)
        if step in ("xnnpack", "vulkan", "coreml", "native") and "error" in res:
            raise SystemExit(f"{name}: reading its {step} payloads failed: {res['error']}")
        oracle["data_file" if step == "ptd" else step] = res
        arrays.update(more)
    save_oracle(name, oracle, {"weights": written["weights"],
                               **{what: written[what] for what in ("dequantize", "folded")
                                  if written.get(what)}}, arrays)


def save_oracle(name: str, oracle: Dict[str, Any], after: Dict[str, Any],
                arrays: Dict[str, Any], out: str = OUT) -> None:
    """Writes ``NAME.oracle.json`` in ``out`` (beside ``NAME.pte``): the steps' answers in
    ``oracle``, its ``pte`` step's spread at the top level (or ``pte_error``), then
    ``after``; and ``NAME.oracle.npz`` from ``arrays``."""
    import numpy as np
    pte = oracle.pop("pte")
    oracle.update(pte if "error" not in pte else {"pte_error": pte["error"]})
    oracle.update(after)
    with open(os.path.join(out, name + ".oracle.json"), "w", encoding="utf-8") as f:
        json.dump(oracle, f, indent=1)
    with open(os.path.join(out, name + ".oracle.npz"), "wb") as f:
        np.savez_compressed(f, **arrays)
    print(name, os.path.getsize(os.path.join(out, name + ".pte")), "bytes")


def main(argv: List[str]) -> int:
    """Command line (see the module docstring)."""
    return run(argv, ["sample", "mlp", "mlp_changed", "two_methods", "mutable", "dynamic",
                      "channels_last", "xnnpack", "external", "xnnpack_q8",
                      "xnnpack_q8_channel", "xnnpack_fp16", "xnnpack_inline",
                      "inline_constants", "cond_stacktrace", "mutable_init", "xnnpack_changed",
                      "xnnpack_specs", "vulkan", "coreml", "coreml_mlp"] + XNN_NAMES
               + NATIVE_NAMES,
               _child, make)


def run(argv: List[str], names: List[str], child: Callable[[str, str, str], None],
        make_one: Callable[[str], None]) -> int:
    """A writer's command line: ``--child STEP NAME OUT`` runs ``child``; otherwise
    ``make_one`` each of ``names`` (or of ``--only NAME,NAME``)."""
    if argv[1:2] == ["--child"]:
        child(argv[2], argv[3], argv[4])
        return 0
    if argv[1:2] == ["--only"]:
        names = argv[2].split(",")
    os.makedirs(OUT, exist_ok=True)
    for name in names:
        make_one(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
