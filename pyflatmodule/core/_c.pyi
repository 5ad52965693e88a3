# The cffi extension csrc/build.py builds from the C core; its declarations are the cdef
# parts of the headers under csrc/ that build.py reads.
from typing import Any

ffi: Any
lib: Any
