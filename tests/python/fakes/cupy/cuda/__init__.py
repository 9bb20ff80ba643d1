"""cupy.cuda stand-in: the current device and stream, set_allocator/get_allocator."""

from . import memory, runtime  # noqa: F401


class Stream:
    def __init__(self, ptr):
        self.ptr = ptr


current_stream = Stream(0x5151)
_allocator = memory.default_pool_malloc


def get_current_stream():
    return current_stream


def set_allocator(allocator=None):
    global _allocator
    _allocator = memory.default_pool_malloc if allocator is None else allocator


def get_allocator():
    return _allocator
