#!/usr/bin/env python3
"""Coverage-guided fuzzing of load() + full decode with atheris (libFuzzer).

    pip install atheris
    python tests/fuzz/fuzz_load.py -max_total_time=120 tests/fuzz/corpus

Every input is loaded and fully decoded (``decode_all.full_decode``) with verify=True
and with verify=False; anything but a well-formed FormatError (code, offset inside the
data, field path) is a finding, as are crashes, hangs (``-timeout``, default 10 s here)
and memory over ``-rss_limit_mb``. libFuzzer options pass through; the corpus
directories given are read (the first one also receives new inputs), and the real
model files (tests/data/*.ff, *.ptl, the packaged sample, and every ExecuTorch file under
tests/data/et/: programs holding each kind of delegate payload but QNN's, whose only
program, 1.3 MB, is past the 1 MiB libFuzzer takes as its longest input by default) are
always added as read-only seeds. Findings are written with ``-artifact_prefix`` (default
here: ``$TMPDIR/pyflatmodule-fuzz-``).

Coverage: Python code is instrumented by atheris. The C core gets coverage only when
built with clang and -fsanitize=fuzzer-no-link: ``tests/fuzz/run_fuzz.sh`` builds such
a copy (with ASan and UBSan) and runs this harness on it; run directly, the harness
uses whatever pyflatmodule is importable (the gcc build: Python coverage only, and a C
fault is still a crash that libFuzzer reports with the input).

Replay one input without atheris: ``python tests/fuzz/fuzz_load.py --replay FILE...``.
"""
from __future__ import annotations

import os
import sys
import tempfile
from typing import List

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)
if os.environ.get("PFM_FUZZ_BUILD"):
    sys.path.insert(0, os.environ["PFM_FUZZ_BUILD"])
else:
    try:               # the installed (or in-place built) package, never the bare sources
        import pyflatmodule  # noqa: F401
    except ImportError:
        sys.path.insert(1, ROOT)


#: Suffixes of the ExecuTorch files taken as seeds.
ET_SUFFIXES = (".pte", ".ptd", ".bpte", ".etdump")


def seed_paths() -> List[str]:
    """The real model files taken as seeds: tests/data/*.ff, *.ptl, the packaged sample
    and every ExecuTorch file under tests/data/et/, its folders' too (the Core AI and
    external-data Ethos-U programs live there), so that every kind of delegate payload
    the readers decode reaches their C checks and graphs."""
    data = os.path.join(TESTS, "data")
    paths = [os.path.join(data, f) for f in sorted(os.listdir(data))
             if f.endswith((".ff", ".ptl"))]
    paths.append(os.path.join(ROOT, "pyflatmodule", "data", "sample.ptl"))
    for folder, dirs, files in sorted(os.walk(os.path.join(data, "et"))):
        dirs.sort()
        paths += [os.path.join(folder, f) for f in sorted(files) if f.endswith(ET_SUFFIXES)]
    return paths


def seed_dir() -> str:
    """A temporary directory holding the seeds (libFuzzer reads every file of a corpus
    directory, and tests/data also holds json and npz files)."""
    out = tempfile.mkdtemp(prefix="pyflatmodule-seeds-")
    data = os.path.join(TESTS, "data")
    for p in seed_paths():
        name = os.path.relpath(p, data).replace(os.sep, "_") if p.startswith(data) \
            else os.path.basename(p)
        with open(p, "rb") as src, open(os.path.join(out, name), "wb") as dst:
            dst.write(src.read())
    return out


def one_input(data: bytes) -> None:
    """The property: load + full decode ends in success or a well-formed FormatError."""
    import pyflatmodule as pfm

    from support.decode_all import error_shape, full_decode
    for verify in (True, False):
        try:
            full_decode(pfm.load(data, verify=verify))
        except pfm.FormatError as e:
            why = error_shape(e, len(data))
            if why is not None:
                raise AssertionError(f"verify={verify}: malformed FormatError: {why}") from e


def replay(paths: List[str]) -> int:
    import traceback
    bad = 0
    for p in paths:
        with open(p, "rb") as f:
            data = f.read()
        try:
            one_input(data)
        except Exception:  # noqa: BLE001
            bad += 1
            print(f"{p}: FAILED\n{traceback.format_exc()}")
        else:
            print(f"{p}: ok")
    return 1 if bad else 0


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--replay":
        sys.exit(replay(sys.argv[2:]))
    import atheris
    with atheris.instrument_imports(include=["pyflatmodule", "support.decode_all"]):
        import pyflatmodule  # noqa: F401

        import support.decode_all  # noqa: F401
    argv = list(sys.argv)
    flags = [a for a in argv[1:] if a.startswith("-")]
    if not any(a.startswith("-timeout=") for a in flags):
        argv.append("-timeout=10")
    if not any(a.startswith("-rss_limit_mb=") for a in flags):
        argv.append("-rss_limit_mb=3072")
    if not any(a.startswith("-artifact_prefix=") for a in flags):
        argv.append("-artifact_prefix=" + os.path.join(tempfile.gettempdir(),
                                                       "pyflatmodule-fuzz-"))
    if not any(a.startswith(("-merge=", "-minimize_crash=")) for a in flags) and \
            any(os.path.isdir(a) for a in argv[1:]):
        argv.append(seed_dir())
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
