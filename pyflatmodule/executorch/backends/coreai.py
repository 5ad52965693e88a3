"""Apple Core AI delegate payloads: the JSON manifest described, the asset's files found
in named data and left as bytes.

ExecuTorch's Core AI backend (``CoreAIBackend``, ExecuTorch 1.5.1,
backends/apple/coreai/compiler/preprocess.py) converts the delegated graph with Apple's
``coreai-torch`` to a Core AI asset (a ``model.aimodel`` bundle: ``main.mlirb``, MLIR
bytecode; ``main.hash``, its 32-byte digest; ``metadata.json``) or, compiled ahead of time,
per-architecture ``model.<arch>.aimodelc`` bundles. The payload is a small UTF-8 JSON
object naming them: ``packaging`` (``inline`` or ``sidecar`` for the portable asset,
``aot_compiled_inline`` or ``aot_compiled_sidecar`` for compiled bundles), ``hash`` (the
asset's ``main.hash`` in hex, 64 digits), ``min_deployment_version`` (a string or null);
a portable asset's ``path`` (``<hash>/model.aimodel``), compiled bundles' ``platform`` and
``archs`` (architecture -> ``<hash>/<bundle>``); and, when inline, ``files``: each file's
path inside the bundles' directory, its bytes the program's named data under the key
``coreai/<hash>/<file>``. A sidecar's files are on disk beside the program, not in it.

The manifest is checked when the payload is read: at most :data:`MAX_MANIFEST` bytes of
UTF-8 holding a JSON object, a packaging the writer knows, the hash 64 hex digits, each
path and file relative (no ``..``, no empty or absolute part) and every path under the
hash; a fault is FormatError ``bad_manifest``, located at the payload's start. Each inline
file's named data must be in the program or in the data files given to ``load`` when some
were given (else ``missing_data``); without data files, a key no file holds is listed in
:attr:`CoreAIManifest.missing` (by the file's index). ``metadata.json``'s fields are
given when the file is here and a JSON object. The MLIR itself is not read: no operator
or weight is listed.
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, NamedTuple, Optional

from ...core.native import format_error, lib
from ...core.source import Bytes
from .base import Backend, DescribedGraph, Payload

__all__ = ["BACKEND", "CoreAIFile", "CoreAIManifest"]

#: The largest manifest read, in bytes (the writer's are a few hundred).
MAX_MANIFEST = 64 * 1024
#: The largest ``metadata.json`` whose fields are read.
MAX_METADATA = 64 * 1024
#: The packagings ExecuTorch's writer gives (its ``AssetPackaging``).
PACKAGINGS = ("inline", "sidecar", "aot_compiled_inline", "aot_compiled_sidecar")
_HASH = re.compile(r"[0-9a-f]{64}\Z")


class CoreAIFile(NamedTuple):
    """One file of an inline asset: its path in the manifest, the named data key holding
    it and its size (None when no file given holds the key)."""

    name: str
    key: str
    size: Optional[int]


def _relative(value: Any) -> bool:
    """Whether ``value`` is a relative POSIX path with no empty, ``.`` or ``..`` part."""
    return (isinstance(value, str) and not value.startswith("/") and "\\" not in value
            and all(part not in ("", ".", "..") for part in value.split("/")))


class CoreAIManifest(DescribedGraph):
    """The manifest of one Core AI payload (checked when made): its packaging, hash,
    paths and minimum deployment version, the inline files' keys and sizes, and
    ``metadata.json``'s fields; a graph with no nodes, values or constants
    (:class:`DelegateGraph`), for the MLIR is not read."""

    def __init__(self, payload: Payload) -> None:
        self._where = payload.where + ".processed<CoreAI manifest>"
        self._offset = payload.offset
        data = payload.data
        if len(data) > MAX_MANIFEST:
            raise self._error("", f"the manifest holds {len(data):,} bytes, more than "
                                  f"{MAX_MANIFEST:,}")
        try:
            manifest = json.loads(bytes(data).decode("utf-8"))
        except (ValueError, RecursionError) as e:   # not UTF-8, not JSON, nested too deep
            raise self._error("", f"not a UTF-8 JSON text: {e}") from None
        if not isinstance(manifest, dict):
            raise self._error("", f"a JSON {type(manifest).__name__}, not an object")
        #: The manifest as JSON data, as written
        self.manifest: Dict[str, Any] = manifest
        #: How the asset is delivered (one of :data:`PACKAGINGS`)
        self.packaging: str = self._field("packaging", lambda v: v in PACKAGINGS,
                                          f"one of {', '.join(PACKAGINGS)}")
        #: The asset's ``main.hash``, 64 hex digits
        self.hash: str = self._field("hash", lambda v: isinstance(v, str)
                                     and _HASH.match(v) is not None, "64 hex digits")
        #: The minimum OS version the asset is for (``"27.0"``), None for the default
        self.min_deployment_version: Optional[str] = self._field(
            "min_deployment_version", lambda v: v is None or isinstance(v, str),
            "a string or null", optional=True)
        compiled = self.packaging.startswith("aot_compiled")
        under = f"a relative path under {self.hash}/"
        #: The portable asset's path (``<hash>/model.aimodel``); None when compiled
        self.path: Optional[str] = None if compiled else self._field(
            "path", self._under_hash, under)
        #: The platform compiled bundles are for; None for a portable asset
        self.platform: Optional[str] = self._field(
            "platform", lambda v: v is None or isinstance(v, str), "a string or null",
            optional=True)
        #: Compiled bundles' paths by architecture (empty for a portable asset)
        self.archs: Dict[str, str] = self._field(
            "archs", lambda v: isinstance(v, dict) and all(
                isinstance(k, str) and self._under_hash(p) for k, p in v.items()),
            f"an object of {under}", optional=not compiled) or {}
        inline = self.packaging.endswith("inline")
        names: List[str] = self._field(
            "files", lambda v: isinstance(v, list) and all(_relative(f) for f in v),
            "a list of relative paths without '..'", optional=not inline) or []
        #: File index -> the named data key no file given holds (loaded without data files)
        self.missing: Dict[int, str] = {}
        self._bytes: Dict[int, Bytes] = {}
        #: The inline files, in the manifest's order (empty for a sidecar)
        self.files: List[CoreAIFile] = [self._file(payload, i, n) for i, n in enumerate(names)]
        #: ``metadata.json``'s fields (``producer``, ``assetVersion``, ...), empty when
        #: the file is not here or not a JSON object
        self.metadata: Dict[str, Any] = self._metadata()

    # ------------------------------------------------------------- reading the manifest

    def _error(self, field: str, message: str) -> Exception:
        return format_error(lib.CAI_E_BAD_MANIFEST, self._offset,
                            self._where + (f".{field}" if field else ""), message)

    def _field(self, name: str, valid: Any, expected: str, optional: bool = False) -> Any:
        """Manifest field ``name``, checked by ``valid``; None when absent and optional."""
        if name not in self.manifest:
            if optional:
                return None
            raise self._error(name, f"the manifest has no {name!r}")
        value = self.manifest[name]
        if not valid(value):
            raise self._error(name, f"{name} is {value!r}, not {expected}")
        return value

    def _under_hash(self, value: Any) -> bool:
        return _relative(value) and str(value).startswith(self.hash + "/")

    def _file(self, payload: Payload, index: int, name: str) -> CoreAIFile:
        """Inline file ``name``, found in named data (or listed missing)."""
        key = f"coreai/{self.hash}/{name}"
        content = payload.resolve(key)
        if content is None:
            if payload.require_all:
                raise format_error(lib.ET_E_MISSING_DATA, self._offset,
                                   f"{self._where}.files[{index}]",
                                   f"Core AI file {name!r}: named data {key!r} is in none "
                                   "of the files")
            self.missing[index] = key
            return CoreAIFile(name, key, None)
        self._bytes[index] = content
        return CoreAIFile(name, key, len(content))

    def _metadata(self) -> Dict[str, Any]:
        for i, f in enumerate(self.files):
            content = self._bytes.get(i)
            if f.name.endswith("/metadata.json") and content is not None \
                    and len(content) <= MAX_METADATA:
                try:
                    fields = json.loads(bytes(content[0:len(content)]).decode("utf-8"))
                except ValueError:
                    return {}
                return fields if isinstance(fields, dict) else {}
        return {}

    # ------------------------------------------------------------------ the description

    def file_bytes(self, index: int) -> Optional[memoryview]:
        """File ``index``'s bytes (:attr:`files`), read-only; None when missing. Bytes
        kept in named data are read when asked for."""
        content = self._bytes.get(index)
        return None if content is None else content[0:len(content)]

    @property
    def header(self) -> Dict[str, Any]:
        """The manifest's fields as the reader checked them, each inline file's name, key
        and size (None when missing), and ``metadata.json``'s fields."""
        return {"packaging": self.packaging, "hash": self.hash, "path": self.path,
                "min_deployment_version": self.min_deployment_version,
                "platform": self.platform, "archs": dict(self.archs),
                "files": [f._asdict() for f in self.files], "metadata": dict(self.metadata)}

    @property
    def description(self) -> str:
        """The packaging, the files and their sizes (or where the sidecar is) and the
        producer."""
        def size(f: CoreAIFile) -> str:
            return f"missing (named data {f.key})" if f.size is None else f"{f.size:,} B"
        files = (", ".join(f"{f.name} {size(f)}" for f in self.files) if self.files else
                 f"beside the program at {self.path or ', '.join(self.archs.values())}")
        producer = self.metadata.get("producer")
        return (f"{self.packaging}: {files}"
                + (f"; producer {producer}" if producer is not None else ""))

    @property
    def version(self) -> str:
        """``metadata.json``'s ``assetVersion``, empty when it is not here."""
        return str(self.metadata.get("assetVersion", ""))

    def __repr__(self) -> str:
        return (f"<CoreAIManifest: {self.packaging}, {len(self.files)} files, "
                f"{len(self.missing)} missing>")


#: Core AI's entry in the backend registry: every payload is read as a manifest.
BACKEND = Backend("CoreAIBackend", "Core AI", "coreai", CoreAIManifest)
