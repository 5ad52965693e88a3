"""cffi builder for the private ``pyflatmodule.core._c`` extension (the C core).

The cdef comes from the headers themselves: the ``fb_status`` enum expanded from
``FB_STATUS_TABLE`` in ``fb/fb_common.h``, then the declarations between the ``cdef``
markers of ``fb/fb_common.h``, ``fb/fb_schema.h``, the generated schema headers in
``gen/`` (written by ``schemas/fbsgen.py``), ``ptmf/ptmf.h`` and the other formats' headers; the
module's source includes every one of them, so that each name of the cdef is declared.
Every ``.c`` file under this directory is compiled.
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
#: The status table, options and error every format shares.
COMMON = os.path.join(HERE, "fb", "fb_common.h")
HEADER = os.path.join(HERE, "ptmf", "ptmf.h")
#: Headers whose cdef parts come between fb_common.h's and ptmf.h's: the descriptor
#: types, then the generated schema headers; the other formats after ptmf.h.
DESCRIPTORS = os.path.join(HERE, "fb", "fb_schema.h")
GENERATED = sorted(glob.glob(os.path.join(HERE, "gen", "*.h")))
FORMATS = [os.path.join(HERE, "ptmf", "ptmf_modules.h"), os.path.join(HERE, "executorch", "et.h"),
           os.path.join(HERE, "executorch", "xnn.h")]
SOURCES = sorted(glob.glob(os.path.join(HERE, "**", "*.c"), recursive=True))
HEADERS = sorted(glob.glob(os.path.join(HERE, "**", "*.h"), recursive=True))


def _cdef_part(text: str) -> str:
    return text.split("/* --- cdef begin --- */")[1].split("/* --- cdef end --- */")[0]


def cdef_source(common_text: str, header_text: str, generated: Iterable[str] = (),
                after: Iterable[str] = ()) -> str:
    """The cffi declarations: the status enum of the common header's table, then the cdef
    parts of the common header, of the headers ptmf.h stands on (`generated`: descriptor
    types and generated schema headers), of ptmf.h (`header_text`) and of the headers
    after it (`after`)."""
    names = re.findall(r"X\(([A-Z]+_(?:OK|E_\w+)),", common_text)
    enum = "enum fb_status {\n" + "".join(f"    {n} = {i},\n" for i, n in enumerate(names))
    parts = [_cdef_part(text) for text in [common_text, *generated, header_text, *after]]
    return enum + "    FB_STATUS_COUNT\n};\n" + "".join(parts)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _flags() -> list:
    flags = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Wconversion", "-Wno-sign-conversion"]
    return flags + shlex.split(os.environ.get("PTMF_CFLAGS", ""))


ffibuilder = FFI()
ffibuilder.cdef(cdef_source(_read(COMMON), _read(HEADER),
                            [_read(p) for p in [DESCRIPTORS] + GENERATED],
                            [_read(p) for p in FORMATS]))
ffibuilder.set_source(
    "pyflatmodule.core._c",
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
