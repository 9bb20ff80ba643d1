"""torch.cuda.memory stand-in. Like PyTorch's, CUDAPluggableAllocator dlopens the path and
resolves both symbols by name; every call is recorded in `calls` for the tests to read. It has
no MemPool (uma_torch.pool refuses such a PyTorch)."""

import ctypes
import os

calls = []


class _CppAllocator:
    """The C++ object PyTorch's CUDAPluggableAllocator.allocator() returns; emptyCache() calls
    the reset function when one was set."""

    def __init__(self):
        self.reset = None
        self.memory_fraction = None

    def set_memory_fraction_fn(self, address):
        calls.append(("set_memory_fraction_fn", address))
        self.memory_fraction = ctypes.CFUNCTYPE(None, ctypes.c_double, ctypes.c_int)(address)

    def set_reset_fn(self, address):
        calls.append(("set_reset_fn", address))
        self.reset = ctypes.CFUNCTYPE(None)(address)


class CUDAPluggableAllocator:
    def __init__(self, path_to_so_file, alloc_fn_name, free_fn_name):
        calls.append(("CUDAPluggableAllocator", path_to_so_file, alloc_fn_name, free_fn_name))
        library = ctypes.CDLL(path_to_so_file)
        self.malloc = getattr(library, alloc_fn_name)
        self.free = getattr(library, free_fn_name)
        self.malloc.restype = ctypes.c_void_p
        self.malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        self.free.restype = None
        self.free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        self._allocator = _CppAllocator()

    def allocator(self):
        return self._allocator


current = None


def change_current_allocator(allocator):
    global current
    calls.append(("change_current_allocator", allocator))
    if os.environ.get("FAKE_TORCH_REFUSE_SWAP") == "1":
        raise RuntimeError("Can't swap an already initialized allocator")
    current = allocator
