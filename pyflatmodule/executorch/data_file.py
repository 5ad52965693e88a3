"""ExecuTorch data files (``.ptd``, identifier ``FT01``): named tensors and blobs."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..core.lazy import np
from ..core.native import lib
from .file import StoredTensor, _File
from .minimum_runtime import MinimumRuntime, data_file_features, minimum
from .regions import Region, data_file_regions


class DataFile(_File):
    """An ExecuTorch data file (``.ptd``): named tensors and blobs in segments."""

    _minimum: Optional[MinimumRuntime] = None

    @property
    def layout(self) -> str:
        """The release whose layout the file is in: ``"0.7.0"`` for the one read since
        0.7.0 (named data, tensors with a TensorLayout), ``"0.6.0"`` for the earlier one
        under the same identifier that only 0.6.0's runtime reads (tensors listed with
        their metadata, FlatTensor.tensor_alignment). They are told apart by the root
        table's fields: 0.6.0's has fields 3 and 4 (segments, named_data), the later
        one three fields in all."""
        return "0.6.0" if self._summary.layout == lib.ET_LAYOUT_FLAT_TENSOR_0_6 else "0.7.0"

    @property
    def minimum_runtime(self) -> MinimumRuntime:
        """The oldest ExecuTorch release whose runtime reads the file: its layout (see
        :attr:`layout`), its header and the schema fields and enum values it holds; see
        :mod:`pyflatmodule.executorch.minimum_runtime`."""
        if self._minimum is None:
            self._minimum = minimum(data_file_features(self._root, int(self._summary.layout)))
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
        segments, tensors and named data, the rest), ``segment`` and ``padding`` regions
        covering every byte once, each segment with the named data (in 0.6.0's layout, the
        tensors) in it by key; see
        :class:`pyflatmodule.executorch.Region`."""
        records, blobs = self._index()
        unnamed = self.layout == "0.6.0"   # its tensors are not named data
        return data_file_regions(self._root, self._summary, blobs, self.size,
                                 {self._name(r): (r.data, r.nbytes)
                                  for r in records if unnamed})

    def info(self) -> Dict[str, Any]:
        """Sizes and counts: file bytes, segments, named data, tensors."""
        s = self._summary
        return {"format": "ptd", "size": self.size, "version": self.version,
                "layout": self.layout,
                "flatbuffer_size": int(s.flatbuffer_end),
                "segment_data_size": int(s.segment_size),
                "segments": len(self._root.tables("segments")),
                "named_data": int(s.n_blobs), "tensors": int(s.n_tensors),
                "native_code": [i._asdict() for i in self.native_code()]}

    def _describe(self) -> str:
        if self.layout == "0.6.0":
            return f"{int(self._summary.n_tensors)} tensors, 0.6.0's layout"
        return f"{int(self._summary.n_blobs)} named data entries"
