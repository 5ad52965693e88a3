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
