#!/usr/bin/env python3
"""ExecuTorch files that hold native code, as AOTInductor's backends ship it:

    python tests/data/make_native_data.py      # needs gcc, executorch 1.5.1, torch 2.13

- the native code is a real ELF shared object, compiled here by gcc from a one-line C
  function (``-shared -fPIC -Os -s``);
- ``native/native.ptd``: a data file, written by ExecuTorch's ``FlatTensorSerializer``,
  whose named data ``kernels/libanswer.so`` is that shared object (as a CUDA export puts
  its ``so_blob`` in a ``.ptd``), beside ``plain`` (16 zero bytes);
- ``native/native.pte``: a program whose module is lowered (ExecuTorch's ``to_backend``)
  to a backend ``NativeDemoBackend`` defined here, whose ``preprocess`` returns that
  shared object as the delegate's payload and stores it again in the program's named
  data (``forward_so_blob``), as AOTInductor's backends do.

The runtime cannot run these (it has no such backend); they are made to be found.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "native")
SOURCE = "int pfm_answer(void) { return 42; }\n"


def shared_object() -> bytes:
    """A small ELF shared object, compiled now."""
    with tempfile.TemporaryDirectory() as d:
        c, so = os.path.join(d, "answer.c"), os.path.join(d, "libanswer.so")
        with open(c, "w", encoding="utf-8") as f:
            f.write(SOURCE)
        subprocess.run(["gcc", "-shared", "-fPIC", "-Os", "-s", "-o", so, c], check=True)
        with open(so, "rb") as f:
            return f.read()


def data_file(so: bytes) -> bytes:
    from executorch.exir._serialize.data_serializer import DataEntry, DataPayload
    from executorch.extension.flat_tensor.serialize.serialize import FlatTensorSerializer
    payload = DataPayload(buffers=[so, bytes(16)],
                          named_data={"kernels/libanswer.so": DataEntry(0, 16, None),
                                      "plain": DataEntry(1, 16, None)})
    return bytes(FlatTensorSerializer().serialize(payload))


def program(so: bytes) -> bytes:
    import torch
    from executorch.exir import to_edge
    from executorch.exir._serialize._named_data_store import NamedDataStore
    from executorch.exir.backend.backend_api import to_backend
    from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult

    class NativeDemoBackend(BackendDetails):
        @staticmethod
        def preprocess(edge_program, compile_specs):   # type: ignore[no-untyped-def]
            store = NamedDataStore()
            store.add_named_data("forward_so_blob", so, 16)
            return PreprocessResult(processed_bytes=so,
                                    data_store_output=store.get_named_data_store_output())

    class Add(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + x

    edge = to_edge(torch.export.export(Add(), (torch.ones(2),)))
    lowered = to_backend("NativeDemoBackend", edge.exported_program(), [])

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lowered = lowered

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lowered(x)

    # to_backend finds backends by their class name among BackendDetails' subclasses
    assert NativeDemoBackend.__name__ == "NativeDemoBackend"
    outer = to_edge(torch.export.export(Wrapped(), (torch.ones(2),)))
    return bytes(outer.to_executorch().buffer)


def main() -> int:
    os.makedirs(OUT, exist_ok=True)
    so = shared_object()
    for name, data in (("native.ptd", data_file(so)), ("native.pte", program(so))):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        print(name, len(data), "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
