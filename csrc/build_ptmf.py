"""cffi builder for the private ``pyflatmodule._ptmf`` extension.

The cdef comes from ``ptmf.h`` itself: the declarations between its ``cdef``
markers, plus the ``ptmf_status`` enum expanded from ``PTMF_STATUS_TABLE``.
Extra compiler flags come from ``PTMF_CFLAGS`` (CI sets ``-Werror`` and the
sanitizers there).
"""
import os
import re
import shlex

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "ptmf.h")


def cdef_source(header_text: str) -> str:
    """The cffi declarations taken from the header text."""
    body = header_text.split("/* --- cdef begin --- */")[1].split("/* --- cdef end --- */")[0]
    names = re.findall(r"X\((PTMF_\w+),", header_text)
    enum = "enum ptmf_status {\n" + "".join(f"    {n} = {i},\n" for i, n in enumerate(names))
    return enum + "    PTMF_STATUS_COUNT\n};\n" + body


def _flags() -> list:
    flags = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Wconversion", "-Wno-sign-conversion"]
    return flags + shlex.split(os.environ.get("PTMF_CFLAGS", ""))


ffibuilder = FFI()
with open(HEADER, encoding="utf-8") as f:
    ffibuilder.cdef(cdef_source(f.read()))
ffibuilder.set_source(
    "pyflatmodule._ptmf",
    '#include "ptmf.h"',
    sources=[os.path.relpath(os.path.join(HERE, "ptmf.c"))],
    include_dirs=[os.path.relpath(HERE)],
    extra_compile_args=_flags(),
    extra_link_args=shlex.split(os.environ.get("PTMF_LDFLAGS", "")),
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
