# The cffi extension csrc/build.py builds; its declarations live in the C headers.
from typing import Any

ffi: Any
lib: Any
