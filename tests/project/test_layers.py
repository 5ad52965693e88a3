"""The package's one-way layers (import-linter, by the contracts in pyproject.toml), what
a client may use of the package (read from its source with ``ast``), and the C folders'
includes, read from csrc/.

One core, one wing per format (docs/architecture.md): the core (source and lifetime, the
compiled C layer, schema-driven tables, options, dtypes, records) names no format; each
wing (``ptmf``, ``executorch``) stands on the core alone, and wings never import each
other; the face (``files``, ``__init__``) stands on the wings; the clients (the command
line, export, diff, interop) stand on the face. Inside a package, each module imports
only the modules listed before it. The clients use only public names: the face, the
wings' packages themselves (never a module inside a wing), the core's ``dtypes``, and no
private attribute of what the package hands out.

The C core is built the same way (second table, C_INCLUDES): ``csrc/fb/`` (the generic
layer and verifier) includes nothing of a format; each format's folder includes the
generic layer, its own headers and the headers generated from its own schemas; the
generated headers in ``csrc/gen/`` stand on ``fb/fb_schema.h`` alone.
"""
from __future__ import annotations

import ast
import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

import pyflatmodule

from support.paths import CSRC, ROOT

PACKAGE = os.path.dirname(os.path.abspath(pyflatmodule.__file__))

#: The wings: one per format, each on the core alone.
WINGS = ("ptmf", "executorch")
CLIENTS = ("cli", "export", "interop", "diff", "naming")
#: What a client may import from below the clients: the face and the wings' packages,
#: the core's dtypes (names of scalar types, their numpy dtypes), names (collections'
#: reprs, plural) and lazy (numpy, imported at its first use).
CLIENT_MAY_IMPORT = {"__init__", "errors", "files", "ptmf", "executorch", "core.dtypes",
                     "core.names", "core.lazy"}

PYPROJECT = os.path.join(ROOT, "pyproject.toml")
#: The C folders under csrc/ and what each one's .c and .h files may include, as the
#: sources write it, relative to csrc/ (fnmatch patterns; ``{stem}`` is the including
#: file's name without its extension, ``{folder}`` the folder it is in one level down).
#: System headers (``<...>``) are open to every folder. A new format adds its row: its
#: folder, the generic layer and its own generated headers.
C_INCLUDES: Dict[str, List[str]] = {
    "fb": ["fb/*.h"],
    # the generated descriptors: the descriptor types, and a generated file its own header
    "gen": ["fb/fb_schema.h", "gen/{stem}.h"],
    "ptmf": ["fb/*.h", "ptmf/*.h", "gen/mobile_bytecode.h"],
    # the status block of zip and torch.save archives (read in Python, by the core)
    "torch_save": ["fb/*.h", "torch_save/*.h"],
    # ExecuTorch's program, data file, bundled program, ETDump and ETRecord
    "executorch": ["fb/*.h", "executorch/*.h", "gen/executorch_*.h"],
    # a delegate's payloads, beside the program: each backend's folder, its generated
    # headers, and ExecuTorch's (the program that holds them), never the other way
    # (and the payload header XNNPACK and Vulkan share, backends/payload_header.h)
    "backends": ["fb/*.h", "executorch/*.h", "backends/*.h", "backends/{folder}/*.h",
                 "gen/{folder}.h"],
}
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"]*)"|<([^>]*)>)', re.M)
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def _sources() -> Iterator[Tuple[str, str]]:
    """(dotted name inside the package, path) of every Python module."""
    for root, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, PACKAGE)[:-3].replace(os.sep, ".")
                yield rel[:-len(".__init__")] if rel.endswith(".__init__") else rel, path


def _is_package(dotted: str) -> bool:
    return os.path.isfile(os.path.join(PACKAGE, *dotted.split("."), "__init__.py"))


def _unit(dotted: str) -> str:
    """The layer table's name for a module: its top-level part in the package."""
    return dotted.split(".")[0]


def _imports(dotted: str, tree: ast.AST) -> Iterator[Tuple[int, str, List[str]]]:
    """(line, imported module inside the package, names taken from it) of every import
    of the package (``__init__`` for names taken from the package itself)."""
    package = dotted.split(".") if _is_package(dotted) else dotted.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "pyflatmodule":
                    yield node.lineno, ".".join(parts[1:]) or "__init__", []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1] if node.level > 1 else package
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "pyflatmodule":
                target = node.module.split(".")[1:]
            else:
                continue
            names = [a.name for a in node.names]
            for name in names:
                # ``from pkg import sub`` imports a submodule when there is one.
                sub = ".".join(target + [name])
                if os.path.exists(os.path.join(PACKAGE, *sub.split("."))) or \
                        os.path.exists(os.path.join(PACKAGE, *sub.split(".")) + ".py"):
                    yield node.lineno, sub, []
                else:
                    yield node.lineno, ".".join(target) or "__init__", [name]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_private_names(tree: ast.AST) -> Set[str]:
    """The private names a module defines: functions, classes, methods, globals,
    attributes it assigns, ``__slots__`` entries."""
    out: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.add(node.value)          # __slots__ entries, getattr() names
    return {name for name in out if _private(name)}


def _root(node: ast.expr) -> Optional[str]:
    """The name an attribute chain (``a.b.c``) starts from, if it starts from one."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _private_uses(dotted: str, tree: ast.AST, library: Set[str]) -> Iterator[str]:
    """Private modules of the package imported, modules a client may not import (inside
    a wing, inside the core), and private names the library defines used as attributes
    (other than of ``self``: a client's own)."""
    reported = set()
    for line, target, names in _imports(dotted, tree):
        private = [p for p in target.split(".") + names if _private(p)]
        if private and (line, target) not in reported:
            reported.add((line, target))
            yield f"{dotted}:{line}: imports the private {', '.join(private)} of the package"
        elif _unit(target) not in CLIENTS and target not in CLIENT_MAY_IMPORT:
            yield (f"{dotted}:{line}: imports {target}; a client imports the face, the "
                   f"wings' packages, core.dtypes, core.names and core.lazy only")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in library and \
                _root(node.value) not in ("self", "cls"):
            yield f"{dotted}:{node.lineno}: uses the private attribute {node.attr}"


def _parsed() -> Iterator[Tuple[str, ast.AST]]:
    for dotted, path in _sources():
        with open(path, encoding="utf-8") as f:
            yield dotted, ast.parse(f.read(), path)


def _lint_imports(package: str) -> subprocess.CompletedProcess[str]:
    """import-linter's verdict on the copy of the package under ``package``'s parent, by
    the contracts of pyproject.toml."""
    root = os.path.dirname(package)
    env = {**os.environ, "PYTHONPATH": root}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command;"
         " sys.exit(lint_imports_command())", "--config", PYPROJECT, "--no-cache"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_every_import_follows_the_layers() -> None:
    result = _lint_imports(PACKAGE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("module, line", [
    ("ptmf/index.py", "from .values import decode"),                  # inner order
    ("core/dtypes.py", "import pyflatmodule.ptmf"),                    # the core, a wing
    ("ptmf/module.py", "from ..executorch import Program"),            # wings apart
    ("executorch/program.py", "from .loader import open_executorch"),  # inner order
    ("executorch/backends/vulkan.py", "from . import xnnpack"),        # readers apart
    ("executorch/backends/base.py", "from .. import program"),         # the door, a wing
    ("files.py", "from . import cli"),                                 # the face, a client
    ("ptmf/newmodule.py", "import os"),                                # not in the table
    ("newmodule.py", "import os"),
])
def test_the_layer_contracts_catch_what_they_forbid(tmp_path: Path, module: str,
                                                    line: str) -> None:
    """Each contract fails on a copy of the package that breaks it."""
    copy = tmp_path / "pyflatmodule"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    path = copy / module
    path.write_text((path.read_text() if path.exists() else "") + f"\n{line}\n")
    result = _lint_imports(str(copy))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout


def _library_private_names() -> Set[str]:
    """Every private name the modules below the clients define."""
    return {name for dotted, tree in _parsed() if _unit(dotted) not in CLIENTS
            for name in _defined_private_names(tree)}


def test_clients_use_only_public_names() -> None:
    library = _library_private_names()
    assert {"_img", "_tensors_and_objects"} <= library
    errors = [e for dotted, tree in _parsed() if _unit(dotted) in CLIENTS
              for e in _private_uses(dotted, tree, library)]
    assert not errors, "\n".join(errors)


def _format_uses(dotted: str, tree: ast.AST) -> Iterator[str]:
    """What ties a command module to one format: an import from a wing (but the
    core's dtypes), a name of a file class, a test of a value's class."""
    for line, target, _ in _imports(dotted, tree):
        if _unit(target) in WINGS:
            yield f"{dotted}:{line}: imports {target}; a command reaches it through cli.formats"
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in ("Module", "Program", "DataFile"):
            yield f"{dotted}:{node.lineno}: names the file class {node.id}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "isinstance" and not (
                    isinstance(node.args[1], ast.Name) and node.args[1].id.endswith("Error")):
            yield f"{dotted}:{node.lineno}: tests a value's class; the adapters do that"


def test_commands_reach_each_format_through_its_adapter() -> None:
    """The command modules (one per command) hold no per-format code: each format's
    adapter in cli.formats implements what they ask of a file."""
    from pyflatmodule.cli import COMMANDS
    commands = {module.__name__.split(".", 1)[1] for module in COMMANDS.values()}
    assert {"cli.info", "cli.tree", "cli.diff"} <= commands
    errors = [e for dotted, tree in _parsed() if dotted in commands
              for e in _format_uses(dotted, tree)]
    assert not errors, "\n".join(errors)
    assert list(_format_uses("cli.tree", ast.parse(
        "from ..executorch import Program\ndef f(m):\n    return isinstance(m, Program)\n")))


def _private_check(dotted: str, source: str) -> List[str]:
    return list(_private_uses(dotted, ast.parse(source), {"_img", "_PACKED_TYPES"}))


def test_the_client_checks_catch_what_they_forbid() -> None:
    """Each client rule fails on a module that breaks it, and passes one that keeps it."""
    assert _private_check("cli.tree", "def f(m):\n    return m._img()\n")
    assert _private_check("cli.tree", "from ..ptmf.index import PtmfIndex\n")
    assert _private_check("cli.tree", "from ..core.native import lib\n")
    assert _private_check("export", "from .core.dtypes import _PACKED_TYPES\n")
    assert not _private_check("cli.tree", "from ..ptmf import short\n")
    assert not _private_check("cli.tree", "from ..core.dtypes import numpy_dtype\n")
    assert not _private_check("cli.dis", "class A:\n    def f(self):\n        return self._x\n")
    assert not _private_check("interop", "def f(th):\n    return th._make_thing()\n")


def _c_sources() -> Iterator[str]:
    """The path, relative to csrc/, of every C source and header."""
    for root, dirs, files in os.walk(CSRC):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".c", ".h")):
                yield os.path.relpath(os.path.join(root, name), CSRC).replace(os.sep, "/")


def _include_errors(rel: str, source: str) -> Iterator[str]:
    """What the C file ``rel`` (relative to csrc/) includes against C_INCLUDES."""
    folder = rel.split("/")[0] if "/" in rel else ""
    allowed = C_INCLUDES.get(folder)
    if allowed is None:
        yield f"csrc/{rel}: not in a folder of C_INCLUDES in tests/project/test_layers.py"
        return
    stem = os.path.splitext(os.path.basename(rel))[0]
    inner = rel.split("/")[1] if rel.count("/") >= 2 else ""
    patterns = [p.replace("{stem}", stem).replace("{folder}", inner) for p in allowed]
    # Comments are blanked, lines kept, so that a commented-out include is none.
    code = _BLOCK_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), source)
    for match in _INCLUDE.finditer(code):
        header = match.group(1)
        if header is None:
            continue                                      # a system header
        line = code.count("\n", 0, match.start()) + 1
        if not os.path.isfile(os.path.join(CSRC, *header.split("/"))):
            yield (f"csrc/{rel}:{line}: includes \"{header}\", which is no file under csrc/ "
                   f"(includes are written relative to csrc/)")
        elif not any(fnmatch.fnmatchcase(header, p) for p in patterns):
            yield (f"csrc/{rel}:{line}: includes \"{header}\"; csrc/{folder}/ includes "
                   f"{', '.join(allowed)} and system headers only")


def test_every_c_include_follows_the_folders() -> None:
    sources = list(_c_sources())
    assert {"fb/fb.h", "ptmf/ptmf_open.c", "executorch/et.c", "gen/mobile_bytecode.h"} <= \
        set(sources)
    errors = []
    for rel in sources:
        with open(os.path.join(CSRC, *rel.split("/")), encoding="utf-8") as f:
            errors += _include_errors(rel, f.read())
    assert not errors, "\n".join(errors)


def test_the_c_checks_catch_what_they_forbid() -> None:
    """Each include rule fails on a file that breaks it, and passes one that keeps it."""
    def check(rel: str, source: str) -> List[str]:
        return list(_include_errors(rel, source))
    assert not check("fb/fb_new.h", '#include "fb/fb_common.h"\n#include <stdint.h>\n')
    assert check("fb/fb.c", '#include "ptmf/ptmf.h"\n')
    assert check("fb/fb.c", '  #  include "gen/mobile_bytecode.h"\n')
    assert check("fb/fb_verify.c", '#include "executorch/et.h"\n')
    assert not check("ptmf/ptmf_index.c", '#include "fb/fb.h"\n#include "gen/mobile_bytecode.h"\n')
    assert check("ptmf/ptmf_index.c", '#include "executorch/et.h"\n')
    assert check("ptmf/ptmf_walk.c", '#include "gen/xnnpack.h"\n')
    assert not check("backends/xnnpack/xnn.c",
                     '#include "gen/xnnpack.h"\n#include "backends/xnnpack/xnn.h"\n')
    assert check("executorch/et.c", '#include "backends/xnnpack/xnn.h"\n')
    assert check("executorch/et.c", '#include "gen/xnnpack.h"\n')
    assert not check("executorch/et.c", '#include "gen/executorch_program.h"\n')
    assert check("executorch/et.c", '#include "ptmf/ptmf.h"\n')
    assert check("executorch/et.h", '#include "gen/mobile_bytecode.h"\n')
    assert not check("gen/xnnpack.h", '#include "fb/fb_schema.h"\n')
    assert not check("gen/xnnpack.c", '#include "fb/fb_schema.h"\n#include "gen/xnnpack.h"\n')
    assert check("gen/xnnpack.c", '#include "gen/mobile_bytecode.h"\n')
    assert check("gen/xnnpack.h", '#include "fb/fb.h"\n')
    assert check("gen/mobile_bytecode.h", '#include "ptmf/ptmf.h"\n')
    assert check("fb/fb.c", '#include "fb.h"\n')                 # not relative to csrc/
    assert check("newformat/new.c", '#include "fb/fb.h"\n')      # a folder not in the table
    assert check("loose.c", "")
    assert not check("fb/fb.c", '/* #include "ptmf/ptmf.h"\n */\n#include <string.h>\n')
    assert check("fb/fb.c", '/* one */\n#include "ptmf/ptmf.h"\n') == [
        'csrc/fb/fb.c:2: includes "ptmf/ptmf.h"; csrc/fb/ includes fb/*.h and system '
        'headers only']
