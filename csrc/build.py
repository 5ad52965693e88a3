"""cffi builder for the private ``pyflatmodule.core._c`` extension (the C core).

Everything is found, nothing is listed: every ``.c`` file under this directory is
compiled, and the headers say the rest.

- The cdef is the part between the ``cdef`` markers of every header that has them,
  a header after the headers it includes (the generic ``fb/`` first, then the
  generated schema headers in ``gen/``, written by ``schemas/fbsgen.py``, then each
  format's folder), preceded by the codes of every status block: a header's
  ``#define <P>_STATUS_TABLE(X)`` (see ``fb/fb_common.h``), whose values the compiler
  gives.
- The module's source includes those headers and the ones declaring a status block
  (``extern const fb_status_block``) or a schema (``extern const fb_schema``), and
  lists both for ``fb_status_block_at`` and ``fb_schema_find``.

A new format adds its schema, its folder and its Python wing; nothing here changes.
Extra compiler flags come from ``PTMF_CFLAGS`` (CI sets ``-Werror`` and the
sanitizers there).
"""
import glob
import os
import re
import shlex
from typing import Dict, List, NamedTuple, Sequence

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = sorted(glob.glob(os.path.join(HERE, "**", "*.c"), recursive=True))
HEADERS = sorted(glob.glob(os.path.join(HERE, "**", "*.h"), recursive=True))
#: The folders whose headers come first when includes leave the order open.
FIRST = ("fb", "gen")

BEGIN, END = "/* --- cdef begin --- */", "/* --- cdef end --- */"


class StatusBlock(NamedTuple):
    """One block of status codes as its header declares it."""

    prefix: str        # "FB", "PTMF", ...
    base: int
    names: List[str]   # in table order: codes base, base + 1, ...


def _cdef_part(text: str) -> str:
    return text.split(BEGIN)[1].split(END)[0]


def status_blocks(texts: Dict[str, str]) -> List[StatusBlock]:
    """The status blocks the headers (path -> text) declare, by base; refuses blocks
    whose codes would overlap."""
    blocks = []
    for text in texts.values():
        for m in re.finditer(r"^#define (\w+)_STATUS_TABLE\(X\)((?:.*\\\n)*.*)$", text, re.M):
            base = re.search(rf"^#define {m.group(1)}_STATUS_BASE (\d+)$", text, re.M)
            if base is None:
                raise ValueError(f"{m.group(1)}_STATUS_TABLE has no {m.group(1)}_STATUS_BASE")
            blocks.append(StatusBlock(m.group(1), int(base.group(1)),
                                      re.findall(r"X\((\w+),", m.group(2))))
    blocks.sort(key=lambda b: b.base)
    for a, b in zip(blocks, blocks[1:]):
        if a.base + len(a.names) > b.base:
            raise ValueError(f"status blocks {a.prefix} and {b.prefix} overlap")
    return blocks


def _includes(text: str) -> List[str]:
    return [os.path.join(HERE, name) for name in re.findall(r'^#include "([^"]+)"', text, re.M)]


def ordered(paths: Sequence[str], texts: Dict[str, str]) -> List[str]:
    """`paths`, each after the headers among them it includes (directly or not); the
    generic folder, then the generated one, then the others, where that leaves a choice."""
    def rank(path: str) -> tuple:
        folder = os.path.relpath(path, HERE).split(os.sep)[0]
        return (FIRST.index(folder) if folder in FIRST else len(FIRST), path)

    wanted, out, seen = set(paths), [], set()

    def visit(path: str) -> None:
        if path in seen:
            return
        seen.add(path)
        for dep in sorted(_includes(texts[path]), key=rank):
            if dep in wanted:
                visit(dep)
        out.append(path)

    for path in sorted(paths, key=rank):
        visit(path)
    return out


def cdef_source(texts: Dict[str, str]) -> str:
    """The cffi declarations: every status block's codes (values from the compiler),
    then the cdef parts of the headers, in include order."""
    enums = "".join("enum {\n" + "".join(f"    {n},\n" for n in b.names) + "    ...\n};\n"
                    for b in status_blocks(texts))
    with_cdef = [p for p, t in texts.items() if BEGIN in t]
    return enums + "".join(_cdef_part(texts[p]) for p in ordered(with_cdef, texts))


def module_source(texts: Dict[str, str]) -> str:
    """The C source of the module: its includes, then the registries of the status
    blocks and the schemas that the headers declare."""
    def declared(kind: str) -> List[str]:
        return [name for p in order for name in
                re.findall(rf"^extern const {kind} (\w+);", texts[p], re.M)]

    declaring = re.compile(r"^extern const fb_(status_block|schema) ", re.M)
    order = ordered([p for p, t in texts.items() if BEGIN in t or declaring.search(t)], texts)
    blocks, schemas = declared("fb_status_block"), declared("fb_schema")
    return ("".join(f'#include "{os.path.relpath(p, HERE)}"\n' for p in order)
            + "\nstatic const fb_status_block *const status_blocks[] = {"
            + ", ".join(f"&{b}" for b in blocks) + "};\n"
            + "\nconst fb_status_block *fb_status_block_at(size_t i) {\n"
            + "    return i < sizeof status_blocks / sizeof status_blocks[0]"
            + " ? status_blocks[i] : NULL;\n}\n"
            + "\nstatic const fb_schema *const schemas[] = {"
            + ", ".join(f"&{s}" for s in schemas) + "};\n"
            + "\nconst fb_schema *fb_schema_find(uint32_t identifier) {\n"
            + "    size_t i;\n"
            + "    for (i = 0; i < sizeof schemas / sizeof schemas[0]; i++)\n"
            + "        if (schemas[i]->identifier == identifier) return schemas[i];\n"
            + "    return NULL;\n}\n")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _flags() -> list:
    flags = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Wconversion", "-Wno-sign-conversion"]
    return flags + shlex.split(os.environ.get("PTMF_CFLAGS", ""))


TEXTS = {path: _read(path) for path in HEADERS}
ffibuilder = FFI()
ffibuilder.cdef(cdef_source(TEXTS))
ffibuilder.set_source(
    "pyflatmodule.core._c",
    module_source(TEXTS),
    sources=[os.path.relpath(path) for path in SOURCES],
    depends=[os.path.relpath(path) for path in HEADERS],
    include_dirs=[os.path.relpath(HERE)],
    extra_compile_args=_flags(),
    extra_link_args=shlex.split(os.environ.get("PTMF_LDFLAGS", "")),
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
