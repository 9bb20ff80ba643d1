"""cupy.cuda.memory stand-in: UnownedMemory keeps its owner alive, as CuPy's does."""

import weakref


class UnownedMemory:
    def __init__(self, ptr, size, owner, device_id=-1):
        self.ptr, self.size, self._owner, self.device_id = ptr, size, owner, device_id


class MemoryPointer:
    def __init__(self, mem, offset):
        self.mem, self.ptr = mem, mem.ptr + offset


class MemoryPool:
    """Like CuPy's in front of `allocator(size)`, without the caching: used_bytes() counts the
    memory its pointers hold until they are dropped."""

    def __init__(self, allocator=None):
        self.allocator = allocator
        self.free_all_blocks_calls = 0
        self._used = 0

    def malloc(self, size):
        pointer = self.allocator(size)
        self._used += size
        weakref.finalize(pointer, self._release, size)
        return pointer

    def _release(self, size):
        self._used -= size

    def used_bytes(self):
        return self._used

    def free_all_blocks(self, stream=None):
        self.free_all_blocks_calls += 1


def default_pool_malloc(size):
    raise AssertionError("the fake CuPy's own pool was used")


_allocator = default_pool_malloc


def set_allocator(allocator=None):
    global _allocator
    _allocator = default_pool_malloc if allocator is None else allocator


def get_allocator():
    return _allocator


def alloc(size):
    """Memory from the current allocator, as cupy.cuda.memory.alloc."""
    return _allocator(size)
