"""What every command asks of a file, whatever its format: the one interface each
format's adapter implements, so that the commands never look at the file's class."""
from __future__ import annotations

import abc
from typing import Any, ClassVar, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from ...core.dtypes import QuantizedTensor, dtype_name
from ...core.lazy import np
from ...executorch import DelegateConstant, Region, StoredTensor
from ...files import FORMATS, Format, RemoteFile
from ..common import Context, Json, Style

#: What ``verify`` checks: a path or URL, or a remote file whose first bytes were read.
Checkable = Union[str, RemoteFile]

Tensor = Union["np.ndarray", QuantizedTensor]
#: A tensor, or one described without its bytes (a program's stored tensors, its
#: delegates' constants): what size and tree need of it.
Described = Union[Tensor, StoredTensor, DelegateConstant]


class Listing(NamedTuple):
    """What ``dis`` shows of a file: one document per method (or function), and a note
    for stderr when the file holds no code (None otherwise)."""

    entries: List[Json]
    note: Optional[str]


def below(children: List[Json], depth: int, max_depth: Optional[int]) -> Dict[str, Any]:
    """A tree node's ``children`` at ``depth``, or how many were cut (``truncated``) at
    ``max_depth`` and below; nothing for a node without children there."""
    if max_depth is not None and depth >= max_depth:
        return {"truncated": len(children)} if children else {}
    return {"children": children}


class FileFormat(abc.ABC):
    """One opened file as the commands see it (a context manager that closes it).

    The class methods work from a path without keeping the file open (``verify``);
    the others read ``file``, the object :func:`pyflatmodule.load` returned.
    """

    #: The class of the files it presents (what ``load`` returns for its format).
    opens: ClassVar[type]

    @classmethod
    def file_format(cls) -> Format:
        """The format it presents: :data:`pyflatmodule.files.FORMATS`' entry for
        :attr:`opens`."""
        return next(f for f in FORMATS if f.class_name == cls.opens.__name__)

    def __init__(self, path: str, file: Any) -> None:
        self.path = path
        self.file = file

    def __enter__(self) -> "FileFormat":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.file.close()

    # ------------------------------------------------------------ info, verify

    @abc.abstractmethod
    def summary(self) -> Json:
        """The facts ``info`` prints, as plain JSON-able data."""

    @staticmethod
    @abc.abstractmethod
    def print_info(ctx: Context, s: Json) -> None:
        """The text ``info`` prints for one file, from its summary."""

    @classmethod
    @abc.abstractmethod
    def verify(cls, path: Checkable, strict: bool, data: Sequence[str] = ()) -> Json:
        """What ``verify`` reports of a valid file (FormatError or OSError otherwise);
        ``data``: the data files of a program's external tensors (other formats ignore
        them, so that one ``--data`` serves a folder of programs)."""

    @classmethod
    @abc.abstractmethod
    def verify_line(cls, result: Json) -> str:
        """The parenthesis of ``verify``'s OK line, from what :meth:`verify` reported."""

    # ------------------------------------------------------------ tree

    @abc.abstractmethod
    def tree(self, max_depth: Optional[int]) -> Json:
        """The file's structure as nested nodes (``name``, ``path``, ``kind``, and
        ``children`` or ``truncated`` beyond ``max_depth``)."""

    @staticmethod
    @abc.abstractmethod
    def tree_lines(st: Style, node: Json) -> List[str]:
        """The text of one node (without its name), then any lines one level below it
        that are not children."""

    # ------------------------------------------------------------ dis, ops

    @abc.abstractmethod
    def listing(self, method: Optional[str], every_function: bool) -> Listing:
        """The disassembly of the method named (short or qualified name; every method
        when None; with ``every_function``, also the other functions, where the
        format has any). CliError ``not_found`` when there is no such method."""

    @staticmethod
    @abc.abstractmethod
    def print_entry(ctx: Context, entry: Json) -> None:
        """The text listing of one entry of :meth:`listing`."""

    @abc.abstractmethod
    def operators(self) -> Optional[List[str]]:
        """The operators the file needs, sorted; None for a file without methods."""

    def delegate_operators(self) -> List[str]:
        """What the file's delegates run, ``BACKEND::KIND`` sorted (an XNNPACK graph's
        node kinds); empty for a format without delegates."""
        return []

    def delegate_backends(self) -> List[str]:
        """The backend ids of the file's delegates, sorted, each once (those whose
        graphs give no node kinds too); empty for a format without delegates."""
        return []

    def kernel_keys(self) -> Optional[Dict[str, List[str]]]:
        """Each operator's kernel keys for ExecuTorch's selective build
        (:meth:`pyflatmodule.Program.kernel_keys`); None for a format it does not read."""
        return None

    def memory_plans(self) -> Optional[List[Json]]:
        """Each method's memory plan (``method``, ``buffer_sizes``, ``peak``,
        ``instructions``, ``tensors``, ``conflicts``); None for a format whose methods have
        none (only ExecuTorch programs plan memory ahead)."""
        return None

    def regions(self) -> Optional[List[Region]]:
        """Where the file's bytes go (:meth:`pyflatmodule.Program.regions`); None for a
        format that does not say."""
        return None

    def named_data_readers(self) -> Dict[str, List[str]]:
        """For each named data key the file's delegates read, what reads it: the
        constant (:meth:`~pyflatmodule.executorch.Delegate.constant_name`: the module's
        name its payload gives, else ``<method>.delegates[<i>].values[<id>]``), where the
        backend says the node and the constant's role in brackets, and `` scales`` when
        the key holds its scales; empty for other formats."""
        return {}

    def region_tensors(self) -> Dict[Tuple[str, str], List[str]]:
        """The tensors (by :meth:`tensor_layouts`' names) whose bytes each region of
        :meth:`regions` holds, by the region's kind and label: a program's constant
        buffers; empty for other formats."""
        return {}

    def size_facts(self) -> Json:
        """What ``size`` reports beside the regions: a program's extended header and its
        delegates' payloads (empty for other formats)."""
        return {}

    def profile(self, program: Optional["FileFormat"], by: str = "instruction",
                skip_runs: int = 0, record: Optional["FileFormat"] = None
                ) -> Optional[List[Json]]:
        """The timings a profile holds, per block of runs (the first ``skip_runs`` of
        each left out), its lines summed ``by`` instruction, operator or delegate node,
        named from ``program`` (the file that ran) when given, each line with the
        graph nodes ``record`` (the program's ETRecord) ties to it; None for a format
        that holds no profile (only ETDumps do)."""
        return None

    def profiled_record(self) -> Optional[Any]:
        """The ETRecord whose graphs name a profile's lines (an ETRecord); None for
        other formats."""
        return None

    def profiled_program(self) -> Optional[Any]:
        """The program whose profiles this file names (an ExecuTorch program, a bundled
        program's embedded one); None for other formats."""
        return None

    # ------------------------------------------------------------ export, extract

    def missing_data(self) -> List[str]:
        """What the file names but no file given holds (a program's external tensors and
        named data: :attr:`pyflatmodule.Program.missing_data`); empty for other kinds."""
        return []

    @abc.abstractmethod
    def tensors(self) -> Dict[str, Tensor]:
        """The tensors ``export`` writes, by name."""

    def tensor_layouts(self) -> Dict[str, Described]:
        """:meth:`tensors`, those a format can describe unread (dtype, shape, bytes) as
        StoredTensors: what ``size`` needs of them."""
        return dict(self.tensors())

    def stored_layouts(self) -> Dict[str, Json]:
        """How the file stores the tensors of :meth:`tensors` whose layout there is not
        torch's, by name (``export`` writes it to the metadata); empty for most formats."""
        return {}

    def dtype_name(self, tensor: Described) -> str:
        """torch's name of the dtype of a tensor taken from the file."""
        if isinstance(tensor, DelegateConstant):
            return tensor.dtype_name
        return dtype_name(tensor)

    @staticmethod
    def address(tensor: Described) -> int:
        """Where a tensor's bytes are in memory (a quantized one's integers): tensors
        taken from a file are views of it, so two at one address of one size read the
        same blob (a StoredTensor's: :attr:`StoredTensor.address`)."""
        if isinstance(tensor, (StoredTensor, DelegateConstant)):
            return tensor.address
        a = tensor.int_repr if isinstance(tensor, QuantizedTensor) else tensor
        return int(a.__array_interface__["data"][0])

    def nbytes(self, tensor: Described) -> int:
        """Bytes the file holds for a tensor taken from it (a quantized one's integers)."""
        return int(tensor.int_repr.nbytes if isinstance(tensor, QuantizedTensor)
                   else tensor.nbytes)

    @abc.abstractmethod
    def extract(self, name: str, jit_source: bool) -> Tuple[Union[bytes, memoryview], str]:
        """The bytes ``extract`` writes for ``name``, and what they are (the ``kind``
        of its JSON); CliError ``not_found`` when the file holds no such entry."""


class NoCode(FileFormat):
    """A format whose files hold no code (a profile, a record): nothing for ``dis`` to
    list, no operators for ``ops``."""

    def listing(self, method: Optional[str], every_function: bool) -> Listing:
        return Listing([], f"an {self.file_format().title}: nothing to disassemble")

    @staticmethod
    def print_entry(ctx: Context, entry: Json) -> None:
        """Such a file lists no entries."""

    def operators(self) -> Optional[List[str]]:
        return None
