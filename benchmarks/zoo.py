"""What the zoo holds, known without importing torch (benchmarks/zoo_build.py writes it).

Real architectures with random weights, each saved by torch in every PTMF form it
writes: ``<model>.<form><suffix>`` in the zoo's folder.
"""
from typing import Dict, Tuple

MODELS: Tuple[str, ...] = (
    "resnet18", "resnet18_channels_last", "mobilenet_v2", "mobilenet_v3_small",
    "mobilenet_v3_small_channels_last", "efficientnet_b0", "squeezenet1_1",
    "shufflenet_v2_x0_5", "mnasnet0_5", "regnet_y_400mf", "mobilenet_v2_fp16",
    "squeezenet1_1_bf16", "efficientvit_m0", "vit_tiny", "convnext_atto", "mobilevit_xxs",
    "transformer", "recurrent", "recurrent_dynamic_qint8", "conv_static_quant",
)

#: form -> file name suffix
FORMS: Dict[str, str] = {"jit": ".jit.ff", "lite": ".lite.ptl", "mobile": ".mobile.ff",
                         "params": ".params.ff"}

#: Models of the ExecuTorch zoo (benchmarks/zoo_et_build.py) and the forms each is
#: exported in: portable kernels, or lowered by the XNNPACK, Vulkan or Core ML
#: partitioner (``coreml_partial``: Core ML's told to leave the residual adds,
#: ``aten.add.Tensor``, to portable kernels, so that the program holds one delegate per
#: stretch between them). The slowest lowerings are left out to keep CI short (XNNPACK's
#: of efficientnet_b0, vit_tiny and recurrent; Vulkan's of vit_tiny, 90 s on two cores,
#: and of recurrent, 45 s; Core ML's of recurrent, 40 s). Vulkan leaves two kernels of
#: the transformer in the program, between eleven delegates: a partial partition of its
#: own.
ET_MODELS: Dict[str, Tuple[str, ...]] = {
    "resnet18": ("portable", "xnnpack", "vulkan", "coreml_partial"),
    "mobilenet_v2": ("portable", "xnnpack", "vulkan", "coreml"),
    "efficientnet_b0": ("portable",), "vit_tiny": ("portable", "coreml"),
    "transformer": ("portable", "xnnpack", "vulkan", "coreml"), "recurrent": ("portable",),
}

#: form -> file name suffix
ET_FORMS: Dict[str, str] = {"portable": ".portable.pte", "xnnpack": ".xnnpack.pte",
                            "vulkan": ".vulkan.pte", "coreml": ".coreml.pte",
                            "coreml_partial": ".coreml_partial.pte"}

#: The delegates' backend id of each lowered form.
ET_BACKENDS: Dict[str, str] = {"xnnpack": "XnnpackBackend", "vulkan": "VulkanBackend",
                               "coreml": "CoreMLBackend", "coreml_partial": "CoreMLBackend"}

#: Models lowered to Arm Ethos-U, Arm TOSA (FP and INT profiles) and OpenVINO (CPU) by
#: ``tests/data/make_et_backends.py --zoo`` as ``<backend>_<model>.pte`` (torchvision's on
#: one 1x3x64x64 image; encoder_layer: torch's TransformerEncoderLayer(64, 4, 128) on 16
#: tokens), with the backends' own readings (tests/support/backends_zoo.py). Apart from
#: the ExecuTorch zoo: they need ExecuTorch's Arm and OpenVINO extras, which CI's
#: environment does not carry.
ET_BACKEND_MODELS: Tuple[str, ...] = ("mobilenet_v2", "resnet18", "efficientnet_b0",
                                      "encoder_layer")

#: Example inputs' shapes where they are not one 1x3x224x224 image: token ids there.
ET_INPUTS: Dict[str, Tuple[Tuple[int, ...], ...]] = {
    "transformer": ((1, 10), (1, 9)),
    "recurrent": ((1, 12),),
}

#: Exports of the Hugging Face zoo (benchmarks/zoo_hf_build.py), optimum-executorch's
#: xnnpack recipe on tiny random-weight models: ``<source>[_8da4w][_ptd]`` (8da4w: 4-bit
#: linear weights in groups of 32 with 8-bit dynamic activations and 8-bit embeddings,
#: ``--qlinear 8da4w --qembedding 8w``; ptd: the XNNPACK weights in a ``.ptd``).
HF_MODELS: Tuple[str, ...] = (
    "llama", "llama_8da4w", "llama_8da4w_ptd", "qwen3", "qwen3_8da4w", "qwen2", "gemma3",
    "gemma3_8da4w", "gemma2", "phi3", "phi3_8da4w", "phi", "mistral", "mistral_8da4w",
    "smollm3", "olmo", "granite", "vit", "whisper", "bert", "distilbert",
)

#: What the Hugging Face zoo's manifest and each ``OUT/<name>.export.json`` hold: the
#: builder exports again what an older one wrote, and the tests rebuild such a manifest.
HF_FORMAT = 2

#: Exports the builder tries that optimum-executorch 1.1.0 (with executorch 1.5.1, torch
#: 2.14.1, transformers 5.0.0rc1) cannot make: its own export fails before there is a
#: file, and the manifest records the error. T5's decoder fails in torch.export, adding a
#: position bias over the 64 cached positions to a mask over the encoder's dynamic length.
HF_FAILING: Tuple[str, ...] = ("t5",)
