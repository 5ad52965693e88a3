"""The exceptions pyflatmodule raises for bad input, and for a remote file it cannot read."""
from __future__ import annotations

from typing import Optional, Tuple

__all__ = ["FormatError", "RemoteError"]


class FormatError(ValueError):
    """The bytes are not a valid PTMF file, or not one this library can read.

    Attributes:
        code: short machine-readable reason, e.g. ``"out_of_bounds"``.
        offset: byte offset of the offending data, when one is known.
        path: where in the model the problem is, e.g.
            ``"ivalues[12].val<TensorMetadata>.sizes"``; empty when not known.
    """

    def __init__(self, code: str, message: str, offset: Optional[int] = None,
                 path: str = "") -> None:
        self.code = code
        self.offset = offset
        self.path = path
        self.reason = message
        where = []
        if path:
            where.append(f"at {path}")
        if offset is not None:
            where.append(f"byte offset {offset}")
        super().__init__(f"{message}" + (f" ({', '.join(where)})" if where else ""))

    def within(self, where: str, base: int = 0) -> "FormatError":
        """This error, raised by a file read inside another (an embedded program, a data
        file given to a program), as the outer one reports it: its path under ``where``,
        its offset moved by ``base`` (0 when the offset stays the inner file's)."""
        return FormatError(self.code, self.reason,
                           None if self.offset is None else self.offset + base,
                           f"{where}.{self.path}" if self.path else where)

    def __reduce__(self) -> Tuple[type, Tuple[str, str, Optional[int], str]]:
        # keeps the attributes through pickling (multiprocessing)
        return (type(self), (self.code, self.reason, self.offset, self.path))


class RemoteError(OSError):
    """A remote file could not be read as asked: not found, a status the server answered,
    an answer of the wrong bytes or length, a range ignored, a timeout or a dropped
    connection (after the tries allowed). The message starts with the URL.

    Attributes:
        url: the file's URL.
        reason: what went wrong, without the URL.
    """

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"{url}: {reason}")

    def __reduce__(self) -> Tuple[type, Tuple[str, str]]:
        return (type(self), (self.url, self.reason))
