"""A program where it lives: ``info`` of a 537 MB ExecuTorch program served by nginx on
127.0.0.1, read by range (``pfm.load(url).info()``: its header and flatbuffer) against
downloading it whole first (``urllib``, then ``pfm.load(bytes).info()``). The bytes each
fetched go to ``extra_info`` (``fetched_bytes``, ``requests``). Loopback is the best case
for the download (about 4 GB/s here); over a real network its time grows with the file's
size and the range reads' with the round trips (two).

Needs nginx (Debian: ``apt-get install nginx-light``) and the program
(``benchmodels.big_program()``, built by ExecuTorch on first use): skips without them.
"""
from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

import pyflatmodule as pfm

import benchmodels
from benchutil import measure
from support.http_servers import Nginx, nginx_binary

GROUP = "remote info: et_const_512m"


@pytest.fixture(scope="module")
def served() -> Iterator[Dict[str, Any]]:
    exe = nginx_binary()
    if exe is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx-light)")
    try:
        path = benchmodels.big_program()
    except benchmodels.NotBuildable as e:
        pytest.skip(str(e))
    with Nginx({"bench": Path(path).parent}, binary=exe) as server:
        yield {"url": server.url("bench", Path(path).name), "size": Path(path).stat().st_size,
               "info": _info_local(str(path))}


def _info_local(path: str) -> Dict[str, Any]:
    with pfm.load(path) as p:
        return p.info()


def test_remote_info_by_range(benchmark: Any, served: Dict[str, Any]) -> None:
    stats = []

    def run() -> Dict[str, Any]:
        with pfm.load(served["url"]) as p:
            info = p.info()
            stats.append(p.fetched)
        return info

    info = measure(benchmark, run, group=GROUP, impl="pyflatmodule", unit="file")
    assert info == served["info"]
    benchmark.extra_info.update(fetched_bytes=stats[-1].bytes, requests=stats[-1].requests,
                                file_bytes=served["size"])


def test_remote_info_after_download(benchmark: Any, served: Dict[str, Any]) -> None:
    def run() -> Dict[str, Any]:
        with urllib.request.urlopen(served["url"], timeout=60) as r:
            data = r.read()
        with pfm.load(data) as p:
            return p.info()

    info = measure(benchmark, run, group=GROUP, impl="download", unit="file", rounds=3)
    assert info == served["info"]
    benchmark.extra_info.update(fetched_bytes=served["size"], requests=1,
                                file_bytes=served["size"])
