# cython.dataclasses is the standard library's in pure-Python mode (Cython/Shadow.py); so for mypy.
from dataclasses import dataclass as dataclass, field as field
