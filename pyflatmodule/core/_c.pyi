# The cffi extension built from csrc/ptmf.h; its declarations live in that header.
from typing import Any

ffi: Any
lib: Any
