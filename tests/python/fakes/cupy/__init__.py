"""A stand-in for CuPy with only what uma_cupy and the docs' examples touch (tests run where
cupy is absent): cupy.ones draws its memory from the current allocator, as CuPy's arrays do."""

import array
import ctypes

from . import cuda  # noqa: F401


class Device:
    def __init__(self, device_id):
        self.id = device_id


class ndarray:  # noqa: N801 (CuPy's name)
    """A float64 vector in memory from the current allocator (cupy.cuda.memory.alloc)."""

    def __init__(self, size):
        self.size, self.nbytes = size, 8 * size
        self.data = cuda.memory.alloc(self.nbytes)
        self.device = Device(self.data.mem.device_id)


def ones(size):
    """cupy.ones(size) of float64: the memory is written, so it must be real memory."""
    a = ndarray(size)
    if size:
        filled = array.array("d", [1.0]) * size
        ctypes.memmove(a.data.ptr, filled.buffer_info()[0], a.nbytes)
    return a
