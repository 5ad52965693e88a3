"""ExecuTorch data files (``.ptd``, identifier ``FT01``): named tensors and blobs."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..core.lazy import np
from .file import StoredTensor, _File
from .minimum_runtime import MinimumRuntime, data_file_features, minimum
from .regions import Region, data_file_regions


class DataFile(_File):
    """An ExecuTorch data file (``.ptd``): named tensors and blobs in segments."""

    _minimum: Optional[MinimumRuntime] = None

    @property
    def minimum_runtime(self) -> MinimumRuntime:
        """The oldest ExecuTorch release whose runtime reads the file: its layout (the
        one read since 0.7.0; 0.6.0 read an earlier one under the same identifier), its
        header and the schema fields and enum values it holds; see
        :mod:`pyflatmodule.executorch.minimum_runtime`."""
        if self._minimum is None:
            self._minimum = minimum(data_file_features(self._root))
        return self._minimum

    @property
    def tensors(self) -> Dict[str, np.ndarray]:
        """Stored tensors by key: read-only zero-copy arrays with their layouts."""
        return {key: stored.array() for key, stored in self._stored_tensors().items()}

    def tensor_layouts(self) -> Dict[str, StoredTensor]:
        """:attr:`tensors` without reading a byte of them (see
        :class:`~pyflatmodule.executorch.StoredTensor`)."""
        return self._stored_tensors()

    def _stored_tensors(self) -> Dict[str, StoredTensor]:
        """Where each tensor is, by key (nothing read)."""
        records, _ = self._index()
        return {self._name(r): self._stored(r) for r in records}

    def state_dict(self) -> Dict[str, np.ndarray]:
        """Every tensor of the file by key (the same as :attr:`tensors`)."""
        return self.tensors

    def regions(self) -> List[Region]:
        """Where the file's bytes go: ``flatbuffer`` (its FH01 header, the index of
        segments and named data, the rest), ``segment`` and ``padding`` regions covering
        every byte once, each segment with the named data in it by key; see
        :class:`pyflatmodule.executorch.Region`."""
        _, blobs = self._index()
        return data_file_regions(self._root, self._summary, blobs, self.size)

    def info(self) -> Dict[str, Any]:
        """Sizes and counts: file bytes, segments, named data, tensors."""
        s = self._summary
        return {"format": "ptd", "size": self.size, "version": self.version,
                "flatbuffer_size": int(s.flatbuffer_end),
                "segment_data_size": int(s.segment_size),
                "segments": len(self._root.tables("segments")),
                "named_data": int(s.n_blobs), "tensors": int(s.n_tensors),
                "native_code": [i._asdict() for i in self.native_code()]}

    def _describe(self) -> str:
        return f"{int(self._summary.n_blobs)} named data entries"
