"""Every kind of source load()s to the same model; buffers are used in place."""
from __future__ import annotations

import io
import mmap
import pathlib
import zipfile

import numpy as np
import pytest

import pyflatmodule as pfm

from support import assert_state_dict, load_expectation, model_path

NAME = "layouts.ff"


def _read():
    with open(model_path(NAME), "rb") as f:
        return f.read()


def _sources():
    data = _read()
    f = open(model_path(NAME), "rb")
    return {
        "str": model_path(NAME),
        "pathlib": pathlib.Path(model_path(NAME)),
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "mmap": mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ),
        "file": f,
        "bytesio": io.BytesIO(data),
    }


@pytest.mark.parametrize("kind", list(_sources()))
@pytest.mark.parametrize("copy", [False, True])
def test_every_source_kind(kind, copy):
    doc, arrays = load_expectation(NAME, "oracle")
    source = _sources()[kind]
    with pfm.load(source, copy=copy) as m:
        assert_state_dict(doc["state_dict"], arrays, m.state_dict())


def test_buffers_are_used_in_place_and_copy_is_a_copy():
    data = bytearray(_read())
    shared = pfm.load(data).storages[0]
    copied = pfm.load(data, copy=True).storages[0]
    whole = np.frombuffer(data, np.uint8)
    assert np.shares_memory(shared, whole)
    assert not np.shares_memory(copied, whole)


def test_unsupported_source_type():
    with pytest.raises(TypeError):
        pfm.load(12345)


def test_missing_path():
    with pytest.raises(FileNotFoundError):
        pfm.load("/nonexistent/model.ptl")


def test_empty_file(tmp_path):
    p = tmp_path / "empty.ptl"
    p.write_bytes(b"")
    with pytest.raises(pfm.FormatError) as e:
        pfm.load(p)
    assert "too_small" == e.value.code


def test_zip_archive_is_named(tmp_path):
    """A zip archive is read as an ETRecord: a TorchScript archive (a zip .ptl) is named
    as a zip that is no ETRecord, bytes that only start as a zip as a bad zip."""
    p = tmp_path / "old.ptl"
    p.write_bytes(b"PK\x03\x04" + bytes(60))
    with pytest.raises(pfm.FormatError) as e:
        pfm.load(p)
    assert "bad_zip" == e.value.code
    assert "zip" in str(e.value)
    with zipfile.ZipFile(p, "w") as z:
        for name in ("archive/data.pkl", "archive/constants.pkl", "archive/version"):
            z.writestr(name, b"")
    with pytest.raises(pfm.FormatError) as e:
        pfm.load(p)
    assert "not_etrecord" == e.value.code
    assert "zip archive" in str(e.value) and "TorchScript" in str(e.value)


def test_verify_report_counts_from_the_bytes():
    data = _read()
    report = pfm.verify(data)
    assert len(data) == report.size
    assert int.from_bytes(data[0:4], "little") > 0
    doc, _ = load_expectation(NAME, "oracle")
    assert doc["info"]["bytecode_version"] == report.bytecode_version
