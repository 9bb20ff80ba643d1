"""cupy.cuda.memory stand-in: UnownedMemory keeps its owner alive, as CuPy's does."""


class UnownedMemory:
    def __init__(self, ptr, size, owner, device_id=-1):
        self.ptr, self.size, self._owner, self.device_id = ptr, size, owner, device_id


class MemoryPointer:
    def __init__(self, mem, offset):
        self.mem, self.ptr = mem, mem.ptr + offset


class MemoryPool:
    """Like CuPy's: calls `allocator(size)` for what it does not hold; keeps what is freed to
    it until free_all_blocks()."""

    def __init__(self, allocator=None):
        self.allocator = allocator
        self.free_all_blocks_calls = 0

    def malloc(self, size):
        return self.allocator(size)

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
