"""cffi builder for the private ``pyflatmodule._ptmf`` extension.

The cdef comes from the headers themselves: the declarations between the ``cdef``
markers of ``ptmf.h`` and of the generated schema headers in ``gen/`` (written by
``schemas/fbsgen.py``), plus the ``ptmf_status`` enum expanded from
``PTMF_STATUS_TABLE``; the module's source includes ``ptmf.h`` and every generated
header, so that each name of the cdef is declared. Every ``.c`` file in this directory is compiled.
Extra compiler flags come from ``PTMF_CFLAGS`` (CI sets ``-Werror`` and the
sanitizers there).
"""
import glob
import os
import re
import shlex
from typing import Iterable

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "ptmf.h")
#: Headers whose cdef parts come before ptmf.h's: the descriptor types, then the
#: generated schema headers; the formats on top after it (they use ptmf.h's types).
DESCRIPTORS = os.path.join(HERE, "fb_schema.h")
GENERATED = sorted(glob.glob(os.path.join(HERE, "gen", "*.h")))
FORMATS = [os.path.join(HERE, "ptmf_modules.h"), os.path.join(HERE, "et.h"),
           os.path.join(HERE, "xnn.h")]
SOURCES = sorted(glob.glob(os.path.join(HERE, "*.c")))
HEADERS = sorted(glob.glob(os.path.join(HERE, "*.h"))) + GENERATED


def _cdef_part(text: str) -> str:
    return text.split("/* --- cdef begin --- */")[1].split("/* --- cdef end --- */")[0]


def cdef_source(header_text: str, generated: Iterable[str] = (), after: Iterable[str] = ()) -> str:
    """The cffi declarations taken from the header text, the texts of the headers it
    stands on (`generated`: descriptor types and generated schema headers) and of the
    headers that stand on it (`after`)."""
    names = re.findall(r"X\((PTMF_\w+),", header_text)
    enum = "enum ptmf_status {\n" + "".join(f"    {n} = {i},\n" for i, n in enumerate(names))
    parts = [_cdef_part(text) for text in [*generated, header_text, *after]]
    return enum + "    PTMF_STATUS_COUNT\n};\n" + "".join(parts)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _flags() -> list:
    flags = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Wconversion", "-Wno-sign-conversion"]
    return flags + shlex.split(os.environ.get("PTMF_CFLAGS", ""))


ffibuilder = FFI()
ffibuilder.cdef(cdef_source(_read(HEADER), [_read(p) for p in [DESCRIPTORS] + GENERATED],
                            [_read(p) for p in FORMATS]))
ffibuilder.set_source(
    "pyflatmodule._ptmf",
    "".join(f'#include "{os.path.relpath(path, HERE)}"\n'
            for path in [HEADER] + GENERATED + FORMATS),
    sources=[os.path.relpath(path) for path in SOURCES],
    depends=[os.path.relpath(path) for path in HEADERS],
    include_dirs=[os.path.relpath(HERE)],
    extra_compile_args=_flags(),
    extra_link_args=shlex.split(os.environ.get("PTMF_LDFLAGS", "")),
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
