"""The command line, end to end in a subprocess."""
from __future__ import annotations

import json
import subprocess
import sys

from conftest import load_expectation, model_path


def _run(*args):
    return subprocess.run([sys.executable, "-m", "pyflatmodule", *args],
                          capture_output=True, text=True, timeout=120)


def test_info_on_the_bundled_sample():
    r = _run("info")
    assert 0 == r.returncode, r.stderr
    doc, _ = load_expectation("sample.ptl", "oracle")
    for name in doc["info"]["function_names"]:
        assert name in r.stdout
    assert "model_info.json" in r.stdout


def test_info_json_counts_tensors_as_torch_does():
    r = _run("info", "--json", model_path("mlp_jit.ff"))
    assert 0 == r.returncode, r.stderr
    out = json.loads(r.stdout)
    doc, _ = load_expectation("mlp_jit.ff", "oracle")
    tensors = doc["state_dict"]["tensors"]
    assert len(tensors) == out["tensors"]["count"]
    expected_bytes = sum(4 * max(1, __import__("math").prod(t["shape"])) for t in tensors.values())
    assert expected_bytes == out["tensors"]["bytes"]
    assert doc["info"]["bytecode_version"] == out["bytecode_version"]


def test_bad_file_is_one_line_no_traceback(tmp_path):
    p = tmp_path / "bad.ptl"
    p.write_bytes(b"\xff" * 64)
    r = _run("info", str(p))
    assert 1 == r.returncode
    assert "Traceback" not in r.stderr
    assert 1 == len(r.stderr.strip().splitlines())
    assert "bad_identifier" in r.stderr


def test_usage_error_exits_2():
    r = _run("frobnicate")
    assert 2 == r.returncode
