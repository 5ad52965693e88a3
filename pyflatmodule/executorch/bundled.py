"""ExecuTorch bundled programs (``.bpte``, identifier ``BP08``): a program with the test
cases it ships, zero-copy and verified.

A bundled program embeds a ``.pte`` byte for byte and, per method, test cases: the
inputs to run it on and the outputs it must give (tensors, ints, bools, floats), as
ExecuTorch's devtools write them and its runtime checks them
(``verify_result_with_bundled_expected_output``). ``pyflatmodule.load`` returns a
:class:`BundledProgram` for one. The C core checks the file when it is opened: its
structure by the project's schema (csrc/schemas/executorch_bundled.fbs, which marks
required what the runtime reads unchecked), then every test tensor's layout and extent
(csrc/executorch/bundled.c); the embedded program is opened as any program is, its
errors located under ``program``, and each suite must name one of its methods. Test
tensors are read-only numpy views of the mapping.
"""
from __future__ import annotations

import mmap
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

from ..core.fbread import Table, schema_of
from ..core.lazy import np
from ..core.names import NamedDict, NamedList, plural
from ..core.native import c_buffer, check, ffi, format_error, lib, new_error
from ..core.options import Options
from ..core.source import Holder, Openable, Source, apply_advice, open_source
from ..errors import FormatError
from .file import dim_order_view
from .loader import open_opened
from .program import Methods, Program
from .regions import Region, bundled_regions

__all__ = ["BundledProgram", "TestCase", "TestSuite", "TestSuites", "TestValue", "open_bundled"]

#: A test input or expected output: a tensor (a read-only view), an int, a bool or a float.
TestValue = Union["np.ndarray", int, bool, float]


def _brief(values: Tuple[TestValue, ...]) -> str:
    """``(float32[2, 4], 2)``: tensors by dtype and shape, scalars by value."""
    return "(" + ", ".join(f"{v.dtype}{list(v.shape)}" if isinstance(v, np.ndarray)
                           else repr(v) for v in values) + ("," if len(values) == 1 else "") + ")"


class TestCase(NamedTuple):
    """One test of a method: the inputs to run it on, the outputs it must give."""

    inputs: Tuple[TestValue, ...]
    expected_outputs: Tuple[TestValue, ...]

    def __repr__(self) -> str:
        return f"TestCase({_brief(self.inputs)} -> {_brief(self.expected_outputs)})"


class TestSuite(NamedList[TestCase]):
    """One method's test cases (a ``list``), whose repr is a line."""

    what = "TestSuite"
    unit = "test case"

    def name_of(self, item: TestCase) -> str:
        return f"{_brief(item.inputs)} -> {_brief(item.expected_outputs)}"


class TestSuites(NamedDict[TestSuite]):
    """Each method's test suite by method name (a ``dict``)."""

    what = "TestSuites"
    unit = "test suite"


def _value(value: Table) -> TestValue:
    member, table = value.union("val")
    assert table is not None   # the core refuses a value without a member
    if member == "Tensor":
        sizes = table.values("sizes")
        order = table.values("dim_order")
        start, _ = table.vector_span("data")
        return dim_order_view(table.buf, int(table.scalar("scalar_type")), sizes, order, start)
    if member == "Int":
        return int(table.scalar("int_val"))
    if member == "Bool":
        return bool(table.scalar("bool_val"))
    return float(table.scalar("double_val"))


class BundledProgram(Holder):
    """An ExecuTorch bundled program (``.bpte``): :attr:`program` and its
    :attr:`test_suites`."""

    def __init__(self, source: Source, summary: Any, program: Program) -> None:
        self._source: Optional[Source] = source
        self._summary = summary
        self._schema = schema_of(lib.BP_FILE_IDENTIFIER)
        self._program = program

    @property
    def _root(self) -> Table:
        if self._source is None:
            raise ValueError("operation on a closed pyflatmodule.BundledProgram")
        return Table(self._schema, self._source.obj, int(self._summary.root), self._schema.root)

    @property
    def program(self) -> Program:
        """The embedded program (a view of this file's bytes; closed with it)."""
        if self._source is None:
            raise ValueError("operation on a closed pyflatmodule.BundledProgram")
        return self._program

    @property
    def version(self) -> int:
        """The bundled program's schema version field."""
        return int(self._root.scalar("version"))

    @property
    def program_span(self) -> Tuple[int, int]:
        """(start, end) byte offsets of the embedded program in the file."""
        start = int(self._summary.program)
        return start, start + int(self._summary.program_size)

    @property
    def program_bytes(self) -> memoryview:
        """The embedded program's bytes: a read-only view of the mapping, a ``.pte`` as
        ExecuTorch wrote it (write it out to run the program without its test cases)."""
        start, end = self.program_span
        if self._source is None:
            raise ValueError("operation on a closed pyflatmodule.BundledProgram")
        return memoryview(self._source.obj)[start:end].toreadonly()

    @property
    def test_suites(self) -> TestSuites:
        """Each method's test cases, by method name in file order (values decode here)."""
        return TestSuites(
            (suite.string("method_name") or "",
             TestSuite(TestCase(tuple(_value(v) for v in case.tables("inputs")),
                                tuple(_value(v) for v in case.tables("expected_outputs")))
                       for case in suite.tables("test_cases")))
            for suite in self._root.tables("method_test_suites"))

    def regions(self) -> List[Region]:
        """Where the file's bytes go: one ``flatbuffer`` region (the whole file) holding
        its header, the embedded ``program`` (whose children are
        :meth:`Program.regions` of it, in this file's offsets), a ``test_suite`` per
        method with a ``test_case`` per case (its ``inputs`` and ``expected_outputs``,
        tensor data included), ``other`` and ``padding``; see
        :class:`pyflatmodule.executorch.Region`."""
        return bundled_regions(self._root, self.program_span, self._program.regions(),
                               self.size)

    @property
    def size(self) -> int:
        """Bytes in the file."""
        return len(self._source) if self._source is not None else 0

    def info(self) -> Dict[str, Any]:
        """Sizes and counts: file bytes, the embedded program's extent, suites, cases."""
        s = self._summary
        start, end = self.program_span
        return {"format": "bpte", "size": self.size, "version": self.version,
                "program_offset": start, "program_size": end - start,
                "test_suites": int(s.n_suites), "test_cases": int(s.n_cases),
                "test_tensors": int(s.n_tensors),
                # the embedded program's, located in this file
                "native_code": [i._replace(where="program." + i.where, offset=i.offset + start)
                                ._asdict() for i in self.program.native_code()]}

    def close(self) -> None:
        """Drop this object's hold on the mapping and its program's; arrays taken earlier
        stay valid."""
        self._program.close()
        super().close()

    def __repr__(self) -> str:
        if self._source is None:
            return "<BundledProgram: closed>"
        suites, cases = int(self._summary.n_suites), int(self._summary.n_cases)
        return (f"<BundledProgram {self._source.name}: {plural(suites, 'test suite')}, "
                f"{plural(cases, 'test case')}>")


def open_bundled(source: Openable, options: Options) -> BundledProgram:
    """Open a bundled program with ``options`` (its embedded program with the same); see
    :func:`pyflatmodule.load`."""
    opened = open_source(source, options)
    summary = ffi.new("bp_summary *")
    err = new_error()
    try:
        check(lib.bp_open(c_buffer(opened.obj), len(opened), options.to_c(), summary,
                          err), err)
    finally:
        opened.release_fd()
    start, size = int(summary.program), int(summary.program_size)
    view = memoryview(opened.obj)[start:start + size]
    try:
        program = open_opened(Source(view, f"{opened.name}:program", False, opened.stat,
                                     opened.path), options)
        # its plans checked now: the test suites name its methods
        methods = program.methods if isinstance(program, Program) else Methods()
    except FormatError as e:
        raise e.within("program", start) from None
    if not isinstance(program, Program):
        raise format_error(lib.FB_E_BAD_IDENTIFIER, start + 4, "program",
                           "the embedded file is a data file (.ptd), not a program")
    ps = program._summary
    segments = start + int(ps.segment_base)
    apply_advice(opened, options.advise,
                 [(segments // mmap.PAGESIZE * mmap.PAGESIZE, segments + int(ps.segment_size))]
                 if ps.segment_size else [])
    bundled = BundledProgram(opened, summary, program)
    for i, suite in enumerate(bundled._root.tables("method_test_suites")):
        name = suite.string("method_name") or ""
        if name not in methods:
            raise format_error(lib.BP_E_UNKNOWN_METHOD, suite.vector_span("method_name")[0],
                               f"method_test_suites[{i}].method_name",
                               f"test suite names method {name!r}, which the program does "
                               f"not have (it has {', '.join(map(repr, methods)) or 'none'})")
    return bundled
