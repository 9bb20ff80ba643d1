"""torch.cuda stand-in: is_initialized(), empty_cache() and the memory submodule."""

import os

from . import memory  # noqa: F401


def is_initialized():
    return os.environ.get("FAKE_TORCH_CUDA_INITIALIZED") == "1"


def empty_cache():
    """Like PyTorch with a pluggable allocator: its reset function, if set."""
    inner = memory.current.allocator() if memory.current is not None else None
    if inner is not None and inner.reset is not None:
        inner.reset()


class Stream:
    """A stream handle: the legacy default stream (0)."""

    cuda_stream = 0


def current_stream(device=None):
    return Stream()
