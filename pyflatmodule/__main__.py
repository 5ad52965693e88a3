"""``python -m pyflatmodule`` and the ``pyflatmodule`` console script.

The commands live in ``pyflatmodule.cli``: info, verify, tree, dis, ops, export, extract.
"""
from __future__ import annotations

import sys

from .cli import main, summarize

__all__ = ["main", "summarize"]

if __name__ == "__main__":
    sys.exit(main())
