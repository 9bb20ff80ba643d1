"""A stand-in for CuPy with only what uma_cupy touches (tests run where cupy is absent)."""

from . import cuda  # noqa: F401
