#!/usr/bin/env python3
"""Write the programs lowered to Arm Ethos-U, Arm TOSA and OpenVINO in tests/data/et/,
with ExecuTorch's, TOSA's and OpenVINO's answers beside them.

    python tests/data/make_et_backends.py [--zoo] [--only NAME,NAME]

It needs ExecuTorch 1.5.1 with its Ethos-U and OpenVINO extras, which the project's own
environment does not carry; a separate one is made with

    python3 -m venv /tmp/et-backends
    /tmp/et-backends/bin/pip install 'executorch[ethos-u,openvino]==1.5.1' \\
        'torch==2.13.0+cpu' nncf==3.1.0

(``ethos-u``: Arm's Vela compiler ethos-u-vela 5.1.0 and its TOSA serializer tosa-tools
2026.5.0; ``openvino``: openvino 2025.4; nncf is what ExecuTorch's OpenVINO package
imports) and the script run with that Python.

Each program NAME gets, as tests/data/make_et_data.py writes them (whose steps this script
runs, each in a child process): ``NAME.pte``; ``NAME.oracle.json`` + ``NAME.oracle.npz``
with ExecuTorch's readings of the program (``header``, ``program``, ``restored``,
``runtime``) and the exported module's ``weights``. Besides:

- ``ethosu_*`` (quantized to int8 with ExecuTorch's ``EthosUQuantizer``, lowered with
  ``EthosUPartitioner``, which runs the Vela compiler): ``ethosu``, per payload Vela
  compiled, what ExecuTorch's ``arm_vela.vela_compile`` packed into it, recorded as it
  ran: each block's name, size and external flag as it passed them to the block header's
  ``struct.pack``, and from the arrays Vela wrote (``out_vela.npz``, as
  ``vela_bin_pack_io`` received them) the command stream's and weights' sizes and
  SHA-256, the scratch size and each input's and output's shape, element size, offset
  and region; the payload's SHA-256 ties each record to its delegate. ``ethosu_external``
  (the MLP, its command stream and weights placed in named data with
  ``VelaExternalBlockPlacements``) is written with its data file ``ethosu.ptd`` in
  et/ethosu_external/, its record adding the external blocks ExecuTorch made (key,
  placement, size, SHA-256).
- ``tosa_*`` (lowered with ``TOSAPartitioner``; ``tosa_int_conv`` quantized to int8
  with ExecuTorch's ``TOSAQuantizer`` for the ``TOSA-1.0+INT`` profile, the others in
  ``TOSA-1.0+FP``): ``tosa``, per TOSA payload, what TOSA's own reader (tosa-tools'
  flatbuffer classes, ``tosa.TosaGraph``) reads in it: the version, each region's name
  and its blocks: name, inputs, outputs, each operator in order (``Op`` name, attribute
  type, input and output names) and each tensor (name, shape, ``DType`` name, variable,
  whether it holds data: its bytes in the npz) and shape (name, rank, its data's bytes in
  the npz).
- ``openvino_*`` (lowered with ``OpenvinoPartitioner``, device CPU): ``openvino``, per
  OpenVINO payload, OpenVINO's own readings: ``Core.import_model`` of the payload (the
  compiled model's inputs and outputs: names, element types, shapes) and
  ``Core.read_model`` of the IR the payload holds (XML deobfuscated with the CPU plugin's
  ``codec_xor`` key, the constants beside it): each operation in order (friendly name,
  type, opset, the shapes and element types of its outputs, the operations its inputs
  come from) and each ``Constant``'s data in the npz (none for an element type
  ``dynamic``, which ``openvino_zero_bias`` holds).

With ``--zoo`` it writes instead, the same way, the real architectures of
benchmarks/zoo.py's ``ET_BACKEND_MODELS`` lowered to each backend (``<backend>_<model>``)
into ``et_backends`` of the benchmark cache (tests/support/backends_zoo.py), and to two
more, which need only the project's environment (``--zoo --only NAME,NAME`` to write
them apart):

- ``native_*``: lowered to ExecuTorch's native backend as make_et_data.py lowers its
  ``native_*`` programs (``NativePartitioner(external_constants_tag=None)``); the oracle
  adds ``native`` as theirs does (ExecuTorch's ``deserialize_program`` of each payload).
- ``coreai_*``: lowered to Core AI as make_et_coreai.py lowers ``coreai_mlp`` (its asset
  inline; Apple's converter on ``PYTHONPATH``, as that script says); the oracle adds
  ``coreai``: that script's reading, each named data's SHA-256 and, per delegate,
  ``asset``: coreai-core's own reading of the asset its files make (``AIModelAsset``:
  whether it is valid, its metadata's creation date, its functions' names).

Each oracle also gives ``writer_seconds``, how long the write step's child process took
(its imports, the export, lowering and serialization).
"""
import hashlib
import io
import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks")
sys.path[:0] = [HERE, BENCHMARKS]

import make_et_data as base  # noqa: E402  (tests/data is no package)

from benchmodels import cache_dir  # noqa: E402
from zoo import ET_BACKEND_MODELS  # noqa: E402

OUT = base.OUT
#: Where the program whose Vela blocks are named data is written, with its data file
#: (a folder of its own: the suites that take every file of et/ as a program's own
#: constants or a tensor file read it through tests/backends/test_ethosu.py alone)
EXTERNAL = os.path.join(OUT, "ethosu_external")

#: The programs, in the order they are written.
NAMES = ["ethosu_conv", "ethosu_mlp", "ethosu_partial", "ethosu_external", "tosa_mlp",
         "tosa_conv", "tosa_partial", "tosa_int_conv", "openvino_conv", "openvino_mlp",
         "openvino_partial", "openvino_zero_bias", "openvino_softmax_any"]
#: With ``--zoo``: the real architectures of benchmarks/zoo.py's ET_BACKEND_MODELS
#: (random weights; torchvision's on one 1x3x64x64 image), lowered like the programs above
#: as ``<backend>_<model>`` and written with their oracles in :data:`ZOO`, outside git
#: (tests/support/backends_zoo.py).
ZOO_NAMES = [f"{b}_{m}" for b in ("ethosu", "tosa", "tosa_int", "openvino", "native",
                                  "coreai") for m in ET_BACKEND_MODELS]
ZOO = os.path.join(cache_dir(), "et_backends")
#: The CPU plugin's key for the IR it exports (OpenVINO, src/plugins/intel_cpu/src/utils/
#: codec_xor.cpp): the XML is XORed with it, byte by byte.
OV_KEY = bytes([0x30, 0x60, 0x70, 0x02, 0x04, 0x08, 0x3F, 0x6F, 0x72, 0x74, 0x78, 0x7F])


# ----------------------------------------------------------------- models (child only)

def _models() -> Dict[str, Callable[[], Tuple[Any, Tuple[Any, ...]]]]:
    import torch
    from torch import nn

    torch.manual_seed(0)

    def conv() -> Tuple[Any, Tuple[Any, ...]]:
        return (nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 3),
                              nn.ReLU()).eval(), (torch.randn(1, 3, 8, 8),))

    def mlp() -> Tuple[Any, Tuple[Any, ...]]:
        return (nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval(),
                (torch.randn(2, 16),))

    class Rounded(nn.Module):
        """Two linears with a rounding between them that the backend does not take (or
        is told not to): two delegates and a portable kernel."""

        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Linear(16, 32)
            self.second = nn.Linear(32, 8)

        def forward(self, x: Any) -> Any:
            return self.second(torch.round(self.first(x)))

    def partial() -> Tuple[Any, Tuple[Any, ...]]:
        return Rounded().eval(), (torch.randn(2, 16),)

    def zero_bias() -> Tuple[Any, Tuple[Any, ...]]:
        """A linear whose bias is zeros, as torchvision's classifiers start: OpenVINO drops
        it for an empty placeholder of element type dynamic."""
        module = nn.Sequential(nn.Linear(16, 8)).eval()
        nn.init.zeros_(module[0].bias)
        return module, (torch.randn(2, 16),)

    class SoftmaxAny(nn.Module):
        """A softmax and a test of any element (as a transformer layer checks its mask):
        the IR names the first ``SoftMax``, and writes the second's reduction with
        relaxed element types (``type_relaxed_opset1``)."""

        def forward(self, x: Any) -> Any:
            return torch.softmax(x, -1), torch.any(x > 0, -1)

    def softmax_any() -> Tuple[Any, Tuple[Any, ...]]:
        return SoftmaxAny().eval(), (torch.randn(2, 16),)

    def zoo(model: str) -> Callable[[], Tuple[Any, Tuple[Any, ...]]]:
        def make() -> Tuple[Any, Tuple[Any, ...]]:
            torch.manual_seed(0)
            if model == "encoder_layer":   # 16 tokens of 64 features
                return (nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0,
                                                   batch_first=True).eval(),
                        (torch.randn(1, 16, 64),))
            from zoo_build import BUILDERS
            return BUILDERS[model]().eval(), (torch.randn(1, 3, 64, 64),)
        return make

    return {"conv": conv, "mlp": mlp, "partial": partial, "external": mlp,
            "zero_bias": zero_bias, "softmax_any": softmax_any,
            **{m: zoo(m) for m in ET_BACKEND_MODELS}}


#: The Ethos-U accelerator each program is compiled for.
_TARGETS = {"ethosu_conv": "ethos-u55-128", "ethosu_mlp": "ethos-u85-256",
            "ethosu_partial": "ethos-u55-128", "ethosu_external": "ethos-u55-128",
            "ethosu_mobilenet_v2": "ethos-u55-128", "ethosu_resnet18": "ethos-u85-256",
            "ethosu_efficientnet_b0": "ethos-u55-128", "ethosu_encoder_layer": "ethos-u85-256"}


def _record_vela(records: List[Dict[str, Any]]) -> None:
    """Record what ExecuTorch's arm_vela packs for each payload (see the docstring):
    its block header's pack and vela_bin_pack_io are wrapped, vela_compile's result
    hashed."""
    import numpy as np
    from executorch.backends.arm import arm_vela
    from executorch.backends.arm.ethosu import backend

    header, pack_io, compile_ = arm_vela._BLOCK_HEADER, arm_vela.vela_bin_pack_io, \
        backend.vela_compile

    class Header:
        size = header.size

        @staticmethod
        def pack(name: bytes, length: int, external: int, reserved: bytes) -> bytes:
            records[-1]["blocks"].append({"name": name.rstrip(b"\0").decode(),
                                          "size": length, "external": external})
            return header.pack(name, length, external, reserved)

    def digest(a: Any) -> str:
        return hashlib.sha256(np.asarray(a).tobytes()).hexdigest()

    def packed_io(prefix: str, data: Any) -> bytes:
        if prefix == "input":
            records.append({"blocks": [], "cmd_data_size": data["cmd_data"].nbytes,
                            "cmd_data_sha256": digest(data["cmd_data"]),
                            "weight_data_size": data["weight_data"].nbytes,
                            "weight_data_sha256": digest(data["weight_data"]),
                            "scratch_size": int(data["scratch_shape"][0])})
        records[-1][prefix + "s"] = [
            {"shape": [int(d) for d in data[prefix + "_shape"][i]],
             "elem_size": int(data[prefix + "_elem_size"][i]),
             "offset": int(data[prefix + "_offset"][i]),
             "region": int(data[prefix + "_region"][i])}
            for i in range(len(data[prefix + "_shape"]))]
        return pack_io(prefix, data)

    def compiled(*args: Any, **kwargs: Any) -> Any:
        result = compile_(*args, **kwargs)
        records[-1]["payload_sha256"] = hashlib.sha256(result.processed_bytes).hexdigest()
        if result.external_blocks:
            records[-1]["external_blocks"] = [
                {"key": b.key, "placement": b.placement, "size": len(b.payload),
                 "sha256": hashlib.sha256(b.payload).hexdigest()}
                for b in result.external_blocks]
        return result

    arm_vela._BLOCK_HEADER = Header   # read by vela_compile at each call
    arm_vela.vela_bin_pack_io = packed_io
    backend.vela_compile = compiled


def _quantized(module: Any, args: Tuple[Any, ...], quantizer: Any) -> Any:
    """``module`` quantized by ``quantizer`` (prepare_pt2e, one calibration with ``args``,
    convert_pt2e). Its exported graph is taken without the guards' submodule call
    (``_guards_fn``) torch adds where the export has guards, as torchvision's networks do:
    the Arm passes refuse a ``call_module``."""
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    prepared = prepare_pt2e(torch.export.export(module, args).module(check_guards=False),
                            quantizer)
    prepared(*args)
    return convert_pt2e(prepared)


def _lower_ethosu(name: str, module: Any, args: Tuple[Any, ...]) -> Tuple[Any, str, Any]:
    import torch
    from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
    from executorch.backends.arm.ethosu.compile_spec import VelaExternalBlockPlacements
    from executorch.backends.arm.quantizer import EthosUQuantizer, get_symmetric_quantization_config
    from executorch.exir import to_edge_transform_and_lower
    placements = VelaExternalBlockPlacements(cmd_data="ethosu", weight_data="ethosu") \
        if name == "ethosu_external" else None
    spec = EthosUCompileSpec(_TARGETS[name], external_block_placements=placements)
    quantizer = EthosUQuantizer(spec)
    quantizer.set_global(get_symmetric_quantization_config())
    converted = _quantized(module, args, quantizer)
    checks = []
    said = ", external_block_placements=VelaExternalBlockPlacements(cmd_data='ethosu', " \
        "weight_data='ethosu')" if placements else ""
    how = (f"EthosUQuantizer(EthosUCompileSpec({_TARGETS[name]!r}{said})), prepare_pt2e, "
           "convert_pt2e, to_edge_transform_and_lower(partitioner=[EthosUPartitioner(spec")
    if name == "ethosu_partial":
        checks.append(_not_round())
        how += ", additional_checks=[a check refusing aten.round]"
    edge = to_edge_transform_and_lower(
        torch.export.export(converted, args),
        partitioner=[EthosUPartitioner(spec, additional_checks=checks or None)])
    return edge, how + ")])", converted


def _not_round() -> Any:
    """An operator-support check leaving the rounding to the portable kernels."""
    from torch.fx.passes.operator_support import OperatorSupportBase

    class NotRound(OperatorSupportBase):
        def is_node_supported(self, _: Any, node: Any) -> bool:
            return "round" not in str(node.target)
    return NotRound()


def _lower_tosa(name: str, module: Any, args: Tuple[Any, ...]) -> Tuple[Any, str]:
    import torch
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower
    quantized = name.startswith("tosa_int_")
    profile = "TOSA-1.0+INT" if quantized else "TOSA-1.0+FP"
    spec = TosaCompileSpec(profile)
    how = ""
    if quantized:
        from executorch.backends.arm.quantizer import (
            TOSAQuantizer,
            get_symmetric_quantization_config,
        )
        quantizer = TOSAQuantizer(spec)
        quantizer.set_global(get_symmetric_quantization_config())
        module = _quantized(module, args, quantizer)
        how = f"TOSAQuantizer(TosaCompileSpec({profile!r})), prepare_pt2e, convert_pt2e, "
    checks = [_not_round()] if name == "tosa_partial" else None
    edge = to_edge_transform_and_lower(
        torch.export.export(module, args),
        partitioner=[TOSAPartitioner(spec, additional_checks=checks)])
    how += (f"to_edge_transform_and_lower(partitioner=[TOSAPartitioner(TosaCompileSpec("
            f"{profile!r})" + (", additional_checks=[a check refusing aten.round]"
                               if checks else "") + ")])")
    return edge, how


def _write(name: str) -> Dict[str, Any]:
    """Exports, lowers and writes program ``name``; returns how, and what was recorded."""
    import torch
    # (tosa_int_NAME: NAME quantized)
    module, args = _models()[name.split("_", 1)[1].removeprefix("int_")]()
    records: List[Dict[str, Any]] = []
    if name.startswith("ethosu"):
        _record_vela(records)
        edge, how, _ = _lower_ethosu(name, module, args)
    elif name.startswith("tosa"):
        edge, how = _lower_tosa(name, module, args)
    elif name.startswith("native"):
        prog, how = base.native_lower(module, args)
        with open(_pte(name), "wb") as f:
            prog.write_to_file(f)
        return {"writer": how, "weights": dict(module.state_dict()), "ethosu": records}
    elif name.startswith("coreai"):
        import make_et_coreai
        with open(_pte(name), "wb") as f:
            f.write(make_et_coreai.lower(module, args))
        return {"writer": "to_edge_transform_and_lower(partitioner=[CoreAIPartitioner()])"
                ".to_executorch()", "weights": dict(module.state_dict()), "ethosu": records}
    else:
        from executorch.backends.openvino.partitioner import OpenvinoPartitioner
        from executorch.exir import to_edge_transform_and_lower
        from executorch.exir.backend.compile_spec_schema import CompileSpec
        edge = to_edge_transform_and_lower(
            torch.export.export(module, args),
            partitioner=[OpenvinoPartitioner([CompileSpec("device", b"CPU")])])
        how = "to_edge_transform_and_lower(partitioner=[OpenvinoPartitioner([CompileSpec(" \
              "'device', b'CPU')])])"
    prog = edge.to_executorch()
    how += ".to_executorch()"
    os.makedirs(os.path.dirname(_pte(name)), exist_ok=True)
    with open(_pte(name), "wb") as f:
        prog.write_to_file(f)
    if name == "ethosu_external":
        prog.write_tensor_data_to_file(EXTERNAL)   # ethosu.ptd, by the blocks' placement
        how += " + write_tensor_data_to_file"
    return {"writer": how, "weights": dict(module.state_dict()), "ethosu": records}


def _pte(name: str) -> str:
    """Where program ``name`` is written."""
    return os.path.join(EXTERNAL if name == "ethosu_external" else
                        ZOO if name in ZOO_NAMES else OUT, name + ".pte")


# ------------------------------------------------------------------ oracle (child only)

def _oracle_openvino(path: str, arrays: Any) -> Dict[str, Any]:
    """Per OpenVINO delegate: OpenVINO's import of the payload and its reading of the IR
    inside (see the module docstring); each constant's bytes in ``arrays`` as
    ``openvino<k>/<operation name>``."""
    import struct

    import numpy as np
    import openvino as ov

    core = ov.Core()
    out = []
    for k, (plan, data) in enumerate(base._payloads(path, "OpenvinoBackend")):
        compiled = core.import_model(io.BytesIO(data), "CPU")

        def port(p: Any) -> Dict[str, Any]:
            return {"names": sorted(p.get_names()),
                    "element_type": p.get_element_type().get_type_name(),
                    "shape": [d.get_length() for d in p.get_partial_shape()]}
        # the payload's layout, StreamSerialize's DataHeader (six u64): used here only to
        # hand OpenVINO's own reader the IR and constants it reads from them
        _, _, consts_at, consts_size, model_at, model_size = struct.unpack_from("<6Q", data)
        xml = bytes(b ^ OV_KEY[i % len(OV_KEY)]
                    for i, b in enumerate(data[model_at:model_at + model_size]))
        weights = np.frombuffer(data[consts_at:consts_at + consts_size], np.uint8).copy()
        model = core.read_model(xml.decode(), ov.Tensor(weights))
        ops = []
        for op in model.get_ordered_ops():
            entry = {"name": op.get_friendly_name(), "type": op.get_type_name(),
                     "opset": op.get_type_info().version_id,
                     "outputs": [{"element_type": o.get_element_type().get_type_name(),
                                  "shape": [d.get_length() for d in o.get_partial_shape()]}
                                 for o in op.outputs()],
                     "inputs": [i.get_source_output().get_node().get_friendly_name()
                                for i in op.inputs()]}
            if op.get_type_name() == "Constant":
                # none for an element type OpenVINO leaves dynamic (the CPU plugin's
                # empty input of a FullyConnected without decompression): get_data
                # refuses it
                entry["data"] = None if op.get_element_type().is_dynamic() else arrays.put(
                    f"openvino{k}/{op.get_friendly_name()}", op.get_data().tobytes())
            ops.append(entry)
        out.append({"plan": plan, "payload_size": len(data),
                    "payload_sha256": hashlib.sha256(data).hexdigest(),
                    "inputs": [port(p) for p in compiled.inputs],
                    "outputs": [port(p) for p in compiled.outputs],
                    "operations": ops})
    return {"delegates": out}


def _oracle_tosa(path: str, arrays: Any) -> Dict[str, Any]:
    """Per TOSA delegate: TOSA's own reading of the payload (tosa-tools' flatbuffer
    classes; see the module docstring); each constant tensor's bytes in ``arrays`` as
    ``tosa<k>/<region>/<block>/<tensor name>``."""
    from tosa import Attribute, DType, Op, TosaGraph

    def names(enum: Any) -> Dict[int, str]:
        return {v: k for k, v in vars(enum).items() if not k.startswith("_")}

    def strings(n: int, get: Callable[[int], bytes]) -> List[str]:
        return [get(i).decode() for i in range(n)]

    ops, dtypes, attrs = names(Op.Op), names(DType.DType), names(Attribute.Attribute)
    out = []
    for k, (plan, data) in enumerate(base._payloads(path, "TOSABackend")):
        assert TosaGraph.TosaGraph.TosaGraphBufferHasIdentifier(data, 0)
        g = TosaGraph.TosaGraph.GetRootAs(data, 0)
        v = g.Version()
        regions = []
        for r in (g.Regions(i) for i in range(g.RegionsLength())):
            blocks = []
            for b in (r.Blocks(i) for i in range(r.BlocksLength())):
                where = f"tosa{k}/{r.Name().decode()}/{b.Name().decode()}/"
                tensors = []
                for t in (b.Tensors(i) for i in range(b.TensorsLength())):
                    entry = {"name": t.Name().decode(),
                             "shape": [int(d) for d in t.ShapeAsNumpy()]
                             if t.ShapeLength() else [],
                             "type": dtypes[t.Type()], "variable": bool(t.Variable()),
                             "has_data": not t.DataIsNone()}
                    if entry["has_data"]:
                        entry["data"] = arrays.put(where + entry["name"],
                                                   t.DataAsNumpy().tobytes()
                                                   if t.DataLength() else b"")
                    tensors.append(entry)
                blocks.append({
                    "name": b.Name().decode(),
                    "inputs": strings(b.InputsLength(), b.Inputs),
                    "outputs": strings(b.OutputsLength(), b.Outputs),
                    "operators": [{"op": ops[o.Op()], "attribute": attrs[o.AttributeType()],
                                   "inputs": strings(o.InputsLength(), o.Inputs),
                                   "outputs": strings(o.OutputsLength(), o.Outputs)}
                                  for o in (b.Operators(i) for i in range(b.OperatorsLength()))],
                    "tensors": tensors,
                    "shapes": [{"name": s.Name().decode(), "rank": s.Rank(),
                                "data": arrays.put(where + s.Name().decode(),
                                                   s.DataAsNumpy().tobytes()
                                                   if s.DataLength() else b"")}
                               for s in (b.Shapes(i) for i in range(b.ShapesLength()))]})
            regions.append({"name": r.Name().decode(), "blocks": blocks})
        out.append({"plan": plan, "payload_size": len(data),
                    "payload_sha256": hashlib.sha256(data).hexdigest(),
                    "version": {"major": v._Major(), "minor": v._Minor(),
                                "patch": v._Patch(), "draft": bool(v._Draft())},
                    "regions": regions})
    return {"delegates": out}


def _oracle_coreai(path: str) -> Dict[str, Any]:
    """make_et_coreai.py's reading of the Core AI delegates, named data and metadata,
    with each named data's SHA-256 (the bytes ExecuTorch's ``deserialize_pte_binary``
    cuts out for its key) and, per delegate, ``asset``: Core AI's own reading of the
    asset those files make (written out under their keys, ``coreai/<hash>/...``, and
    loaded with coreai-core's ``AIModelAsset``): whether it is valid, its metadata's
    creation date and its functions' names."""
    import tempfile

    import make_et_coreai
    from coreai.authoring.asset import AIModelAsset
    from executorch.exir._serialize._program import deserialize_pte_binary
    with open(path, "rb") as f:
        data = f.read()
    res = dict(make_et_coreai._oracle(data)["coreai"])
    named = deserialize_pte_binary(data).named_data
    blobs = {} if named is None else {k: bytes(named.buffers[e.buffer_index])
                                      for k, e in named.pte_data.items()}
    res["named_data_sha256"] = {k: hashlib.sha256(b).hexdigest() for k, b in blobs.items()}
    with tempfile.TemporaryDirectory() as d:
        for k, b in blobs.items():
            os.makedirs(os.path.dirname(os.path.join(d, k)), exist_ok=True)
            with open(os.path.join(d, k), "wb") as f:
                f.write(b)
        for delegate in res["delegates"]:
            asset = os.path.join(d, "coreai", delegate["manifest"]["path"])
            loaded = AIModelAsset.load(asset)
            delegate["asset"] = {"valid": AIModelAsset.is_valid(asset),
                                 "creation_date": loaded.metadata.creation_date,
                                 "functions": list(loaded.summary().function_names)}
    return res


def _child(step: str, name: str, result: str) -> None:
    import numpy as np
    arrays = base._Arrays()
    path = _pte(name)
    res: Dict[str, Any]
    if step == "write":
        w = _write(name)
        res = {"writer": w["writer"], "ethosu": w["ethosu"], "weights": {}}
        for fqn, t in w["weights"].items():
            t = t.detach().contiguous()
            res["weights"][fqn] = {"dtype": str(t.dtype).replace("torch.", ""),
                                   "shape": list(t.shape),
                                   "data": arrays.put("weights/" + fqn, t.numpy().tobytes())}
    elif step == "pte":
        res = base._oracle_pte(path, arrays)
    elif step == "openvino":
        res = _oracle_openvino(path, arrays)
    elif step == "tosa":
        res = _oracle_tosa(path, arrays)
    elif step == "native":
        res = base.oracle_native(path)
    elif step == "coreai":
        res = _oracle_coreai(path)
    else:
        res = base._runtime(path)
    with open(result + ".json", "w", encoding="utf-8") as f:
        json.dump(res, f)
    np.savez(result + ".npz", **arrays.arrays)


def make(name: str) -> None:
    """Writes program ``name`` and its oracle."""
    started = time.monotonic()
    written, arrays = base.run_child(__file__, "write", name)
    seconds = round(time.monotonic() - started, 1)
    if "error" in written:
        raise SystemExit(f"{name}: ExecuTorch refused to write it: {written['error']}")
    oracle: Dict[str, Any] = {"writer": written["writer"], "writer_seconds": seconds}
    backend = name.split("_", 1)[0]
    steps = ("pte", "runtime") + ((backend,) if backend in ("openvino", "tosa", "native",
                                                             "coreai") else ())
    for step in steps:
        res, more = base.run_child(__file__, step, name)
        if step == backend and "error" in res:
            raise SystemExit(f"{name}: reading its {backend} payloads failed: {res['error']}")
        oracle[step] = res
        arrays.update(more)
    base.save_oracle(name, oracle, {"weights": written["weights"], **(
        {"ethosu": {"delegates": written["ethosu"]}} if name.startswith("ethosu") else {})},
        arrays, os.path.dirname(_pte(name)))


def main(argv: List[str]) -> int:
    """Command line (see the module docstring)."""
    if argv[1:2] == ["--zoo"]:
        os.makedirs(ZOO, exist_ok=True)
        return base.run(argv[1:], ZOO_NAMES, _child, make)
    return base.run(argv, NAMES, _child, make)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
