# For mypy only (pyproject.toml [tool.mypy] mypy_path): Cython's own shadow module, with `cython.dataclasses` as the
# standard library's dataclasses, which the pure-Python shadow hands the engine's classes to at run time (mypy sees
# the shadow's stand-in object and would not know the classes are dataclasses).
from Cython.Shadow import *

from . import dataclasses as dataclasses  # type: ignore[no-redef]  # the shadow's stand-in, replaced
