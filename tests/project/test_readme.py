"""Every Python and shell example in README.md and docs/*.md runs, and prints what the
document shows.

- ```python blocks are doctests (``>>>``), run from the repository root, where the tour
  finds ``pyflatmodule/data/sample.ptl``; a block that imports torch is a torch test.
- ```console blocks are transcripts: each ``$ command`` line runs in bash (stdout and
  stderr together, as a terminal shows them) and what follows it, up to the next
  ``$`` line, is what it must print. Every block runs in a fresh directory holding
  ``pyflatmodule/data/sample.ptl`` and ``sample.pte``, after the block of docs/cli.md that
  makes the files the command line's examples use (SETUP). ``pyflatmodule`` and
  ``python`` there are this interpreter with the package under test.
- ``...`` in shown output stands for any text (doctest's ELLIPSIS), for elided lines
  and for timings.
- A block preceded by ``<!-- readme-test: skip (REASON) -->`` is not run; only the
  blocks in SKIPPED may be marked so, and every other ```python, ```sh or ```console
  block must be one of the two runnable kinds.
"""
from __future__ import annotations

import doctest
import os
import re
import shutil
import subprocess
import sys
from typing import List, NamedTuple

import pytest

from support import HAS_TORCH, SAMPLE
from support.paths import ROOT

#: The documents whose samples run, relative to ROOT.
DOCUMENTS = ["README.md"] + sorted(os.path.join("docs", n)
                                   for n in os.listdir(os.path.join(ROOT, "docs"))
                                   if n.endswith(".md"))
#: The first line of the console block every other runs after.
SETUP = "$ cp pyflatmodule/data/sample.ptl model.ptl"
SKIP_MARK = re.compile(r"<!-- readme-test: skip \((.+)\) -->")

#: First lines of the blocks that are not run here, and why.
SKIPPED = {
    # .ci/run runs these two commands itself, in a fresh virtual environment.
    "pip install . && pyflatmodule info": "run by CI",
    # The timed benchmarks take minutes and gigabytes; their suites run untimed in pytest.
    "python -m pytest benchmarks --benchmark-enable": "timed benchmark run",
    # A server and a store to read from: tests/remote runs the same against nginx.
    "pyflatmodule info https://example.org/models/llama.pte --stats": "needs a server",
    # Rebuilds the tree in place, runs this suite and rewrites tests/data with torch.
    "python setup.py build_ext --inplace": "development loop",
}

FLAGS = doctest.ELLIPSIS


class Block(NamedTuple):
    lang: str
    text: str
    document: str    # the file, relative to ROOT
    line: int        # line number of the block's first line of content
    skip: str        # the skip marker's reason, or ""

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"


def document_blocks(document: str) -> List[Block]:
    """Every fenced block of one document."""
    with open(os.path.join(ROOT, document), encoding="utf-8") as f:
        lines = f.read().splitlines()
    blocks = []
    k = 0
    while k < len(lines):
        fence = re.fullmatch(r"```(\S*)", lines[k])
        if not fence:
            k += 1
            continue
        end = lines.index("```", k + 1)
        marker = SKIP_MARK.fullmatch(lines[k - 1]) if k else None
        blocks.append(Block(fence.group(1), "\n".join(lines[k + 1:end]) + "\n", document,
                            k + 2, marker.group(1) if marker else ""))
        k = end + 1
    return blocks


BLOCKS = [b for d in DOCUMENTS for b in document_blocks(d)]
PYTHON = [b for b in BLOCKS if b.lang == "python" and not b.skip]
CONSOLE = [b for b in BLOCKS if b.lang == "console" and not b.skip]


def test_every_sample_is_run_or_marked():
    runnable = {"python": ">>> ", "console": "$ "}
    for b in BLOCKS:
        if b.skip:
            assert any(b.text.startswith(first) for first in SKIPPED), b
        elif b.lang in ("python", "py", "sh", "bash", "shell", "console", "pycon"):
            assert b.lang in runnable and b.text.startswith(runnable[b.lang]), (
                f"{b.where}: a {b.lang} block that is neither a doctest nor a "
                "console transcript, nor marked as not run")
    skipped = [b for b in BLOCKS if b.skip]
    assert len(SKIPPED) == len(skipped)
    assert 3 <= len(PYTHON) and 5 <= len(CONSOLE)
    assert [b.document for b in CONSOLE if b.text.startswith(SETUP)] == ["docs/cli.md"]
    assert {"README.md", "docs/cli.md", "docs/python.md", "docs/executorch.md"} <= {
        b.document for b in PYTHON + CONSOLE}


# ------------------------------------------------------------------- python


@pytest.mark.parametrize("block", [
    pytest.param(b, id=b.where,
                 marks=[pytest.mark.torch] + ([] if HAS_TORCH else [
                     pytest.mark.skip(reason="torch is not installed")]))
    if "import torch" in b.text else pytest.param(b, id=b.where)
    for b in PYTHON])
def test_python_example(block, monkeypatch):
    monkeypatch.chdir(ROOT)
    test = doctest.DocTestParser().get_doctest(block.text, {"__name__": "readme"},
                                               block.document,
                                               os.path.join(ROOT, block.document),
                                               block.line - 1)
    assert test.examples
    report: List[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    result = runner.run(test, out=report.append, clear_globs=True)
    assert 0 == result.failed, "".join(report)


# ------------------------------------------------------------------ console


def transcript_commands(text: str) -> List[str]:
    """The commands of a console transcript."""
    return [line[2:] for line in text.splitlines() if line.startswith("$ ")]


@pytest.fixture
def shell(tmp_path):
    """Run the documents' commands in a fresh directory holding the samples, as bash
    would."""
    data = tmp_path / "pyflatmodule" / "data"
    data.mkdir(parents=True)
    shutil.copyfile(SAMPLE, data / "sample.ptl")
    shutil.copyfile(os.path.join(os.path.dirname(SAMPLE), "sample.pte"), data / "sample.pte")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Scripts, not symlinks: a symlink to a virtual environment's python outside its bin/
    # finds no pyvenv.cfg and starts the base interpreter, without the test extras.
    for name, args in (("pyflatmodule", ' -m pyflatmodule'), ("python", "")):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{sys.executable}"{args} "$@"\n')
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONUNBUFFERED="1")
    status = [0]

    def run(command: str) -> str:
        # Each command in its own bash, after one that leaves the last exit status in $?.
        r = subprocess.run(["bash", "-c", f"(exit {status[0]}); {command}"], cwd=tmp_path,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=180)
        status[0] = r.returncode
        return r.stdout

    setup = next(b for b in CONSOLE if b.text.startswith(SETUP))
    for command in transcript_commands(setup.text):
        assert "" == run(command), command
    status[0] = 0
    return run


@pytest.mark.parametrize("block", CONSOLE, ids=[b.where for b in CONSOLE])
def test_console_example(block, shell):
    got = ""
    for command in transcript_commands(block.text):
        out = shell(command)
        got += f"$ {command}\n" + out + ("" if out.endswith("\n") or not out else "\n")
    checker = doctest.OutputChecker()
    assert checker.check_output(block.text, got, FLAGS), checker.output_difference(
        doctest.Example("", block.text), got, FLAGS)
