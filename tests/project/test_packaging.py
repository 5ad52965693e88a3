"""The sdist: built with the real frontend (``python -m build --sdist``) from a copy of
the source files, it must hold every file of the project that building, testing and
benchmarking read, and no build product.

Installing the sdist and the wheel into fresh environments (a compile each) is slower:
``.ci/run`` does it, and checks the wheel holds the package alone.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from email.parser import Parser
from typing import List, Set, Tuple

import pytest

from support.paths import ROOT

_SKIP_DIRS = {".git", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis",
              ".benchmarks", ".mypy_cache"}


def source_files() -> Tuple[List[str], bool]:
    """(the project's files, whether git listed them): git's list in a checkout (its
    index: a new file counts once added), else (an unpacked sdist) every file under
    the tree but caches, virtual environments and build products."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True,
                             check=True, timeout=60).stdout.decode()
        files = [f for f in out.split("\0") if f and os.path.isfile(os.path.join(ROOT, f))]
        if files:
            return files, True
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for top, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info")
                   and not os.path.exists(os.path.join(top, d, "pyvenv.cfg"))]
        found += [os.path.relpath(os.path.join(top, n), ROOT) for n in names
                  if not n.endswith((".so", ".o", ".pyc"))]
    return found, False


def shipped_files() -> Set[str]:
    """What the sdist must hold: the project's files but its dot-files (.ci/,
    .gitignore); outside a checkout, where a build may have written sources into the
    package, the top-level files and csrc/, docs/, tests/ and benchmarks/."""
    files, from_git = source_files()
    return {f for f in files if not f.startswith(".") and (
        from_git or "/" not in f or f.split("/", 1)[0] in ("csrc", "docs", "tests", "benchmarks"))}


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> tarfile.TarFile:
    base = tmp_path_factory.mktemp("sdist")
    src = base / "src"
    for name in source_files()[0]:
        target = src / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, name), target)
    r = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation",
                        "--outdir", str(base / "dist"), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert 0 == r.returncode, r.stdout[-3000:] + r.stderr[-3000:]
    (path,) = (base / "dist").glob("pyflatmodule-*.tar.gz")
    return tarfile.open(path)


def _members(sdist: tarfile.TarFile) -> Set[str]:
    return {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}


def test_sdist_holds_what_the_build_needs(sdist):
    names = _members(sdist)
    # the cffi builder and the header it reads (once missing: pip could not build)
    assert {"setup.py", "pyproject.toml", "csrc/build.py", "csrc/fb/fb_common.h",
            "csrc/ptmf/ptmf_open.c", "LICENSE", "README.md"} <= names
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        builder = f.read().split('cffi_modules=["', 1)[1].split(":", 1)[0]
    assert builder in names


def test_sdist_holds_every_project_file_and_no_build_product(sdist):
    names = _members(sdist)
    wanted = shipped_files()
    assert any(f.startswith("csrc/") for f in wanted)
    assert set() == wanted - names
    for folder in ("csrc/", "tests/", "benchmarks/"):
        assert any(n.startswith(folder) for n in names), folder
    assert [] == [n for n in names if n.endswith((".so", ".o", ".pyc", ".pyd"))
                  or "__pycache__" in n]


def test_sdist_metadata_license_and_requirements(sdist):
    member = next(m for m in sdist.getmembers() if m.name.count("/") == 1
                  and m.name.endswith("/PKG-INFO"))
    extracted = sdist.extractfile(member)
    assert extracted is not None
    meta = Parser().parsestr(extracted.read().decode("utf-8"))
    assert "BSD-3-Clause" == meta["License-Expression"]
    assert ["LICENSE"] == meta.get_all("License-File")
    with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("BSD 3-Clause License") and "the pyflatmodule authors" in text
    requires = meta.get_all("Requires-Dist")
    assert any(r.replace(" ", "").startswith("ml_dtypes>=") or
               r.replace(" ", "").startswith("ml-dtypes>=") for r in requires), requires
