"""Delegate payload readers, one module per backend, by the backend's id.

To add a backend: a module here with its reader (a function of a :class:`Payload` that
checks the payload and returns its :class:`DelegateGraph`) and a :class:`Backend` record
``BACKEND``, then one entry in :data:`MODULES`; its C checks, if any, in
``csrc/backends/``. A backend's module is imported when a program first names its id."""
from __future__ import annotations

import importlib
from typing import Dict, Iterator, Mapping, Optional

from .base import Backend, DelegateGraph, Payload, Resolver, described, described_as

__all__ = ["BACKENDS", "Backend", "DelegateGraph", "MODULES", "Payload", "Resolver",
           "backend_of", "described", "described_as"]

#: The module (in this package) of every backend whose payloads are read, by the id a
#: program's delegates give.
MODULES: Dict[str, str] = {"XnnpackBackend": "xnnpack", "VulkanBackend": "vulkan",
                           "CoreMLBackend": "coreml", "QnnBackend": "qnn",
                           "EthosUBackend": "ethosu", "OpenvinoBackend": "openvino",
                           "NativeBackend": "native", "TOSABackend": "tosa",
                           "CoreAIBackend": "coreai"}


class _Registry(Mapping[str, Backend]):
    """:data:`MODULES`' backends, each module imported at its first lookup."""

    def __init__(self) -> None:
        self._loaded: Dict[str, Backend] = {}

    def __getitem__(self, delegate_id: str) -> Backend:
        found = self._loaded.get(delegate_id)
        if found is None:
            module = importlib.import_module(f"{__name__}.{MODULES[delegate_id]}")
            found = self._loaded[delegate_id] = module.BACKEND
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(MODULES)

    def __len__(self) -> int:
        return len(MODULES)


#: Every backend whose payloads are read, by the id a program's delegates give.
BACKENDS: Mapping[str, Backend] = _Registry()


def backend_of(delegate_id: str) -> Optional[Backend]:
    """The backend registered for a delegate's id, None for one read as opaque bytes."""
    return BACKENDS[delegate_id] if delegate_id in MODULES else None
