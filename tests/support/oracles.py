"""The model files in tests/data and what torch said about them.

Expected values come from torch: ``<name>.oracle.json/.npz`` hold what torch 2.13 read
back from each file (tests/support/torch_oracle.py), ``<name>.inputs.json/.npz`` what the
generator fed torch (tests/data/make_data.py).
"""
from __future__ import annotations

import base64
import importlib.util
import json
import os
from typing import Any, Dict, Tuple

import numpy as np

import pyflatmodule as pfm

from .paths import DATA

#: The sample model shipped with the package.
SAMPLE = os.path.join(os.path.dirname(pfm.__file__), "data", "sample.ptl")

#: File names of every model file in DATA (the packaged sample is ``sample.ptl``).
MODEL_FILES = sorted(f for f in os.listdir(DATA) if f.endswith((".ff", ".ptl")))
#: Whether torch is installed (the comparisons with torch live skip without it).
HAS_TORCH = importlib.util.find_spec("torch") is not None


def model_path(name: str) -> str:
    """Path of a model file by file name (``sample.ptl`` is the packaged sample)."""
    return SAMPLE if name == "sample.ptl" else os.path.join(DATA, name)


def _stem(name: str) -> str:
    return "sample" if name == "sample.ptl" else os.path.splitext(name)[0]


def load_expectation(name: str, kind: str) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """(json, arrays) of ``<stem>.<kind>.json/.npz``; kind is "oracle" or "inputs"."""
    base = os.path.join(DATA, f"{_stem(name)}.{kind}")
    with open(base + ".json", encoding="utf-8") as f:
        doc = json.load(f)
    arrays: Dict[str, np.ndarray] = {}
    if os.path.exists(base + ".npz"):
        with np.load(base + ".npz") as z:
            arrays = {k: z[k] for k in z.files}
    return doc, arrays


def decoded_extra_files(doc: Dict[str, Any]) -> Dict[str, bytes]:
    """The extra files a json document lists, base64-decoded."""
    return {k: base64.b64decode(v) for k, v in doc.items()}
