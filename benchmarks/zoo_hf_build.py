#!/usr/bin/env python3
"""Write the Hugging Face zoo: programs as optimum-executorch exports them.

    python benchmarks/zoo_hf_build.py OUT [NAME ...]

For each export of :data:`zoo.HF_MODELS` a tiny model is made from a transformers
config with random weights (nothing is downloaded; ``HF_HUB_OFFLINE=1``), saved with
``save_pretrained`` and exported with optimum-executorch's ``main_export`` (what
``optimum-cli export executorch --model DIR --task TASK --recipe xnnpack [--qlinear 8da4w
--qembedding 8w]`` runs) to ``OUT/<name>.pte``. The ``*_ptd`` exports take
optimum-executorch's exported programs, tag every weight placeholder for external data
(the ``delegate_constant_tag`` ExecuTorch's ``delegate_external_constants_pass_unlifted``
sets; the recipe has no option for it) and lower them as optimum's xnnpack recipe does,
writing the XNNPACK weights to ``OUT/<name>.ptd``.

``OUT/zoo_hf.json`` records, per export, how it was made and what ExecuTorch says of it:
``reader`` (``deserialize_pte_binary``: each method's operators, delegate ids, inputs,
outputs and value count; the named data keys; for a ``.ptd`` its keys too; each call of
a quantized embedding kernel, ``embedding_byte``, with the value indices of its weight,
scales and zero points and its bounds) and
``runtime`` (``executorch.runtime``: method names, each method's input and output dtypes
and sizes, None for those that are no tensors, the program loaded with its data file),
each read in a child process; an export that fails is recorded with its error (the
exception its traceback ends with). Without names it tries :data:`zoo.HF_MODELS` and
:data:`zoo.HF_FAILING`, those optimum-executorch is known to fail on (T5, whose decoder
fails in ``torch.export`` with optimum-executorch 1.1.0). Each export's own entry is kept
in ``OUT/<name>.export.json``: a second run into the same folder exports only what is not
there yet (or was written by a builder of another :data:`zoo.HF_FORMAT`), and asks
ExecuTorch again about every file.

For the 8da4w exports ``<name>.torchao.npz`` holds torchao's own view of every 4-bit
linear weight of the module optimum exported: ``<fqn>.qdata`` (int8 values),
``<fqn>.scale`` (float32, one per channel and group), ``<fqn>.zero_point`` and
``<fqn>.dequantized`` (torchao's ``dequantize_affine``, to float32, over the scales as
the program stores them: rounded to bfloat16), with each weight's ``block_size`` in the
manifest (``torchao``); and of every 8-bit embedding weight (``--qembedding 8w``, one
scale a row, which ExecuTorch's ``embedding_byte`` kernel dequantizes, not XNNPACK), the
same four arrays under the embedding's fqn, its scales as torchao keeps them (float32),
with its ``block_size`` and bounds in the manifest (``torchao_embedding``). Needs
optimum-executorch (executorch, torch, transformers, torchao); each export runs in a
child process of its own.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from importlib.metadata import version
from typing import Any, Callable, Dict, List, Tuple

from zoo import HF_FAILING, HF_FORMAT, HF_MODELS

_SEQ = 64   # max_seq_len of the language models: small KV caches


# --------------------------------------------------------------------------- the models

def _text(config_cls: str, **extra: Any) -> Callable[[], Any]:
    sizes = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    sizes.update(extra)

    def make() -> Any:
        import transformers
        return getattr(transformers, config_cls)(**sizes)
    return make


def _vit() -> Any:
    from transformers import ViTConfig
    return ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=128, num_labels=10)


def _whisper() -> Any:
    from transformers import WhisperConfig
    return WhisperConfig(vocab_size=256, d_model=64, encoder_layers=2, decoder_layers=2,
                         encoder_attention_heads=4, decoder_attention_heads=4,
                         encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=80,
                         max_source_positions=1500, max_target_positions=_SEQ,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2,
                         decoder_start_token_id=1, suppress_tokens=[], begin_suppress_tokens=[])


def _t5() -> Any:
    from transformers import T5Config
    return T5Config(vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                    decoder_start_token_id=0)


def _bert() -> Any:
    from transformers import BertConfig
    return BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=128, max_position_embeddings=128)


def _distilbert() -> Any:
    from transformers import DistilBertConfig
    return DistilBertConfig(vocab_size=256, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                            max_position_embeddings=128)


#: source model -> (config maker, transformers model class)
SOURCES: Dict[str, Tuple[Callable[[], Any], str]] = {
    "llama": (_text("LlamaConfig"), "LlamaForCausalLM"),
    # small, two groups of 32 a row in 8da4w (tests/data/make_hf_data.py)
    "minillama": (_text("LlamaConfig", vocab_size=32, intermediate_size=64,
                        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1),
                  "LlamaForCausalLM"),
    "qwen3": (_text("Qwen3Config", head_dim=16), "Qwen3ForCausalLM"),
    "gemma3": (_text("Gemma3TextConfig", head_dim=16, sliding_window=32), "Gemma3ForCausalLM"),
    "smollm3": (_text("SmolLM3Config", pad_token_id=0, bos_token_id=1, eos_token_id=2),
                "SmolLM3ForCausalLM"),
    "vit": (_vit, "ViTForImageClassification"),
    "whisper": (_whisper, "WhisperForConditionalGeneration"),
    "bert": (_bert, "BertForMaskedLM"),
    "t5": (_t5, "T5ForConditionalGeneration"),
    "phi3": (_text("Phi3Config", pad_token_id=0), "Phi3ForCausalLM"),
    "mistral": (_text("MistralConfig", sliding_window=None), "MistralForCausalLM"),
    "qwen2": (_text("Qwen2Config"), "Qwen2ForCausalLM"),
    "gemma2": (_text("Gemma2Config", head_dim=16, sliding_window=32), "Gemma2ForCausalLM"),
    "olmo": (_text("OlmoConfig", pad_token_id=0), "OlmoForCausalLM"),
    "granite": (_text("GraniteConfig"), "GraniteForCausalLM"),
    "phi": (_text("PhiConfig"), "PhiForCausalLM"),
    "distilbert": (_distilbert, "DistilBertForMaskedLM"),
}

_TASKS = {"vit": "image-classification", "whisper": "automatic-speech-recognition",
          "bert": "fill-mask", "distilbert": "fill-mask", "t5": "text2text-generation"}
_QUANT = {"qlinear": "8da4w", "qembedding": "8w"}


def spec(name: str) -> Tuple[str, str, Dict[str, Any], bool]:
    """(source model, task, main_export options, external weights) of an export name:
    ``<source>[_8da4w][_ptd]``."""
    parts = name.split("_")
    source = parts[0]
    task = _TASKS.get(source, "text-generation")
    options: Dict[str, Any] = dict(_QUANT) if "8da4w" in parts else {}
    if task in ("text-generation", "automatic-speech-recognition", "text2text-generation"):
        options["max_seq_len"] = _SEQ
    return source, task, options, "ptd" in parts


# --------------------------------------------------------------------------- one export

def _save_source(source: str, folder: str) -> None:
    import torch
    import transformers
    make, cls = SOURCES[source]
    torch.manual_seed(0)
    model = getattr(transformers, cls)(make()).eval()
    model.save_pretrained(folder)
    if source == "whisper":   # optimum's speech task reads the feature extractor
        transformers.WhisperFeatureExtractor(feature_size=80).save_pretrained(folder)


def _lower(module: Any, external: bool, out: str, name: str) -> Dict[str, Any]:
    """optimum's xnnpack recipe (recipes/xnnpack.py), the weights tagged for a .ptd."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import (
        EdgeCompileConfig,
        ExecutorchBackendConfig,
        to_edge_transform_and_lower,
    )
    from executorch.exir.passes import MemoryPlanningPass
    from optimum.executorch.passes.remove_padding_idx_embedding_pass import (
        RemovePaddingIdxEmbeddingPass,
    )
    programs = module.export()
    if len(programs) == 1:
        programs = {"forward": next(iter(programs.values()))}
    if external:   # as delegate_external_constants_pass_unlifted tags get_attr nodes
        for ep in programs.values():
            sig = ep.graph_signature
            weights = {**sig.inputs_to_parameters, **sig.inputs_to_lifted_tensor_constants,
                       **{k: v for k, v in sig.inputs_to_buffers.items()
                          if v not in sig.buffers_to_mutate.values()}}
            for node in ep.graph.nodes:
                if node.op == "placeholder" and node.name in weights:
                    node.meta.setdefault("custom", {})["delegate_constant_tag"] = name
    edge = to_edge_transform_and_lower(
        programs, partitioner=[XnnpackPartitioner()],
        compile_config=EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True),
        constant_methods=module.metadata, transform_passes=[RemovePaddingIdxEmbeddingPass()])
    et = edge.to_executorch(config=ExecutorchBackendConfig(
        extract_delegate_segments=True, do_quant_fusion_and_const_prop=True,
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False)))
    with open(os.path.join(out, name + ".pte"), "wb") as f:
        et.write_to_file(f)
    if external:
        et.write_tensor_data_to_file(out)
    return {"how": "optimum's xnnpack lowering" + (
        ", weights tagged delegate_constant_tag" if external else "")}


def _torchao_weights(module: Any, path: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """torchao's reading of every per-group 4-bit linear weight and every 8-bit embedding
    weight of `module` (see the docstring): the linear and the embedding ones' info."""
    import numpy as np
    import torch
    from torchao.quantization.quant_primitives import _DTYPE_TO_QVALUE_BOUNDS, dequantize_affine
    from torchao.quantization.quantize_.workflows import IntxUnpackedToInt8Tensor
    arrays: Dict[str, Any] = {}
    linear: Dict[str, Any] = {}
    embedding: Dict[str, Any] = {}
    for fqn, m in module.named_modules():
        p = getattr(m, "weight", None)   # optimum keeps it parametrized: rebuilt here
        if not isinstance(p, IntxUnpackedToInt8Tensor):
            continue
        if isinstance(m, torch.nn.Embedding) and p.target_dtype == torch.int8:
            stored, kind = p.scale, embedding    # embedding_byte keeps them as they are
        elif p.target_dtype == torch.int4:
            stored, kind = p.scale.to(torch.bfloat16).to(p.scale.dtype), linear   # XNNPACK's
        else:
            continue
        qmin, qmax = _DTYPE_TO_QVALUE_BOUNDS[p.target_dtype]
        deq = dequantize_affine(p.qdata, p.block_size, stored, p.zero_point, torch.int8,
                                qmin, qmax, output_dtype=torch.float32)
        for what, t in (("qdata", p.qdata), ("scale", p.scale), ("zero_point", p.zero_point),
                        ("dequantized", deq)):
            arrays[f"{fqn}.{what}"] = t.detach().contiguous().numpy()
        kind[fqn] = {"shape": list(p.qdata.shape), "block_size": list(p.block_size),
                     "scale_dtype": str(p.scale.dtype).replace("torch.", "")}
        if kind is embedding:
            kind[fqn].update(quant_min=qmin, quant_max=qmax)
    np.savez_compressed(path, **arrays)
    return linear, embedding


def export_one(out: str, name: str) -> Dict[str, Any]:
    """Exports `name` into `out` (in this process); its manifest entry."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from optimum.exporters.executorch.task_registry import discover_tasks, task_registry
    source, task, options, external = spec(name)
    src = os.path.join(out, "src", source)
    if not os.path.exists(os.path.join(src, "config.json")):
        _save_source(source, src)
    entry: Dict[str, Any] = {"format": HF_FORMAT, "name": name, "source": source, "task": task,
                             "options": options, "recipe": "xnnpack"}
    start = time.perf_counter()
    discover_tasks()
    module = task_registry.get(task)(src, **options)
    if "qlinear" in options:
        entry["torchao"], entry["torchao_embedding"] = _torchao_weights(
            module.model, os.path.join(out, name + ".torchao.npz"))
    entry.update(_lower(module, external, out, name))
    entry["seconds"] = round(time.perf_counter() - start, 1)
    entry["file"] = name + ".pte"
    if external:
        entry["data"] = [name + ".ptd"]
    return entry


# --------------------------------------------------------------------------- ExecuTorch's word

def _embeddings(program: Any) -> List[Dict[str, Any]]:
    """Each call of a quantized_decomposed embedding kernel (``embedding_byte``: weight,
    scales, zero points, quant_min, quant_max, indices, out): its method, operator and the
    value indices of its weight, scales and zero points (None when Null), its bounds."""
    from executorch.exir.schema import Int, KernelCall, Null
    calls = []
    for plan in program.execution_plan:
        for chain in plan.chains:
            for instruction in chain.instructions:
                call = instruction.instr_args
                if not isinstance(call, KernelCall):
                    continue
                op = plan.operators[call.op_index]
                if op.name not in ("quantized_decomposed::embedding_byte",
                                   "quantized_decomposed::embedding_4bit",
                                   "quantized_decomposed::embedding_2bit"):
                    continue
                weight, scales, zero_points, qmin, qmax = call.args[:5]
                bounds = [plan.values[i].val for i in (qmin, qmax)]
                assert all(isinstance(b, Int) for b in bounds), bounds
                calls.append({
                    "method": plan.name, "operator": f"{op.name}.{op.overload}",
                    "weight": weight, "scales": scales,
                    "zero_points": None if isinstance(plan.values[zero_points].val, Null)
                    else zero_points,
                    "quant_min": bounds[0].int_val, "quant_max": bounds[1].int_val})
    return calls


def reader(path: str, data: List[str]) -> Dict[str, Any]:
    """What deserialize_pte_binary (and, for each .ptd, ExecuTorch's flat tensor reader)
    says of a program."""
    from executorch.exir._serialize import _program as P
    from executorch.extension.flat_tensor.serialize import serialize as S
    with open(path, "rb") as f:
        pte = P.deserialize_pte_binary(f.read())
    program = pte.program
    methods = {}
    for plan in program.execution_plan:
        methods[plan.name] = {
            "operators": [o.name + (("." + o.overload) if o.overload else "")
                          for o in plan.operators],
            "delegates": [d.id for d in plan.delegates], "inputs": list(plan.inputs),
            "outputs": list(plan.outputs), "values": len(plan.values)}
    named = sorted(pte.named_data.pte_data) if pte.named_data is not None else []
    out: Dict[str, Any] = {"methods": methods, "named_data": named, "data": {},
                           "embeddings": _embeddings(program)}
    for d in data:
        with open(d, "rb") as f:
            ft = S._deserialize_to_flat_tensor(f.read())
        out["data"][os.path.basename(d)] = sorted(n.key for n in ft.named_data)
    return out


_RUNTIME = r"""
import json, sys
from executorch.runtime import Runtime
data = sys.argv[2] if len(sys.argv) > 2 else None
program = Runtime.get().load_program(sys.argv[1], data_path=data)
out = {"method_names": sorted(program.method_names), "methods": {}}
for name in program.method_names:
    meta = program.metadata(name)
    def spec(get, i):
        try:
            t = get(i)
        except IndexError:   # not a tensor (the constant methods' Int, Bool, Double)
            return None
        return {"dtype": int(t.dtype()), "sizes": list(t.sizes())}
    def specs(n, get):
        return [spec(get, i) for i in range(n)]
    out["methods"][name] = {"inputs": specs(meta.num_inputs(), meta.input_tensor_meta),
                            "outputs": specs(meta.num_outputs(), meta.output_tensor_meta)}
print(json.dumps(out))
"""


def _raised(stderr: str) -> str:
    """The exception a child's traceback ends with (``Type: message``, and torch's
    ``Explanation:`` line after it), else its last line."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    raised = [i for i, ln in enumerate(lines)
              if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b.*:", ln)]
    if not raised:
        return (lines or [""])[-1][:300]
    at = raised[-1]
    said = lines[at] + "".join(" " + ln.strip() for ln in lines[at + 1:at + 2]
                               if ln.strip().startswith("Explanation:"))
    return said[:600]


def _child(argv: List[str], timeout: int) -> Dict[str, Any]:
    r = subprocess.run([sys.executable] + argv, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        return {"error": f"exit {r.returncode}: {_raised(r.stderr)}"}
    doc: Dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return doc


def build(out: str, names: List[str]) -> Dict[str, Any]:
    """Writes the named exports into `out`, each in a child process; returns the manifest."""
    me = os.path.abspath(__file__)
    files = []
    for name in names:
        done = os.path.join(out, name + ".export.json")
        entry = {}
        if os.path.exists(done):   # exported before: ExecuTorch is asked again
            with open(done, encoding="utf-8") as f:
                entry = json.load(f)
        if entry.get("format") != HF_FORMAT:   # by an older builder, or not at all
            entry = _child([me, "--one", out, name], timeout=1800)
        if "error" in entry:
            files.append({"name": name, "error": entry["error"]})
            continue
        path = os.path.join(out, entry["file"])
        data = [os.path.join(out, d) for d in entry.get("data", [])]
        entry["reader"] = _child([me, "--reader", path] + data, timeout=600)
        entry["runtime"] = _child(["-c", _RUNTIME, path] + data, timeout=600)
        files.append(entry)
    manifest = {"format": HF_FORMAT, "versions": {p: version(p) for p in
                             ("optimum-executorch", "executorch", "torch", "transformers",
                              "torchao")},
                "files": files}
    with open(os.path.join(out, "zoo_hf.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def main(argv: List[str]) -> int:
    """Command line (see the module docstring)."""
    if len(argv) >= 4 and argv[1] == "--one":
        entry = json.dumps(export_one(argv[2], argv[3]))
        with open(os.path.join(argv[2], argv[3] + ".export.json"), "w", encoding="utf-8") as f:
            f.write(entry)
        print(entry)
        return 0
    if len(argv) >= 3 and argv[1] == "--reader":
        print(json.dumps(reader(argv[2], argv[3:])))
        return 0
    if len(argv) < 2:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    os.makedirs(argv[1], exist_ok=True)
    build(argv[1], argv[2:] or list(HF_MODELS) + list(HF_FAILING))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
