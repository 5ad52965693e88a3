"""Delegate payload readers, one module per backend, by the backend's id.

To add a backend: a module here with its reader (a function of a :class:`Payload` that
checks the payload and returns its :class:`DelegateGraph`) and a :class:`Backend` record,
then one entry in :data:`BACKENDS`; its C checks, if any, in ``csrc/backends/``."""
from __future__ import annotations

from typing import Dict, Optional

from . import coreml, ethosu, openvino, qnn, vulkan, xnnpack
from .base import Backend, DelegateGraph, Payload, Resolver, described, described_as

__all__ = ["BACKENDS", "Backend", "DelegateGraph", "Payload", "Resolver", "backend_of", "described",
           "described_as",
           "coreml", "ethosu", "openvino", "qnn", "vulkan", "xnnpack"]

#: Every backend whose payloads are read, by the id a program's delegates give.
BACKENDS: Dict[str, Backend] = {b.id: b for b in (xnnpack.BACKEND, vulkan.BACKEND,
                                                       coreml.BACKEND, qnn.BACKEND,
                                                       ethosu.BACKEND, openvino.BACKEND)}


def backend_of(delegate_id: str) -> Optional[Backend]:
    """The backend registered for a delegate's id, None for one read as opaque bytes."""
    return BACKENDS.get(delegate_id)
