"""torch.cuda stand-in: is_initialized(), empty_cache(), the memory submodule, and streams and
events that log what is asked of them to `log` (with the fake plan library's calls, when a test
shares the list) so that a test can check the order. Time is a number a test sets on each
stream (`clock_ms`, 0 unless set): an event recorded on a stream takes its clock, and
elapsed_time is the difference."""

import itertools
import os

from . import memory  # noqa: F401

log = []
_ids = itertools.count(1)


def is_initialized():
    return os.environ.get("FAKE_TORCH_CUDA_INITIALIZED") == "1"


def set_per_process_memory_fraction(fraction, device=None):
    """Like PyTorch with a pluggable allocator: its memory-fraction function, if set."""
    inner = memory.current.allocator() if memory.current is not None else None
    if inner is not None and inner.memory_fraction is not None:
        inner.memory_fraction(fraction, device or 0)


def current_device():
    return 0


def device_count():
    return 1


def empty_cache():
    """Like PyTorch with a pluggable allocator: its reset function, if set."""
    inner = memory.current.allocator() if memory.current is not None else None
    if inner is not None and inner.reset is not None:
        inner.reset()


class Stream:
    """A stream handle: the legacy default stream (0) is the current one; Stream(device) makes
    a side stream with an address of its own."""

    def __init__(self, device=None, ptr=None):
        self.cuda_stream = ptr if ptr is not None else 0x5000 + next(_ids)
        self.clock_ms = 0.0

    def wait_event(self, event):
        log.append(("wait_event", self.cuda_stream, event.id))

    def wait_stream(self, other):
        log.append(("wait_stream", self.cuda_stream, other.cuda_stream))

    def synchronize(self):
        log.append(("stream.synchronize", self.cuda_stream))


class Event:
    def __init__(self, enable_timing=False):
        self.id, self.enable_timing, self.time_ms = next(_ids), enable_timing, None

    def record(self, stream=None):
        stream = stream or current_stream()
        self.time_ms = stream.clock_ms
        log.append(("record", stream.cuda_stream, self.id))

    def elapsed_time(self, end):
        """ms from this event to `end` (both recorded with timing enabled), as PyTorch's."""
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("elapsed_time needs events made with enable_timing=True")
        if self.time_ms is None or end.time_ms is None:
            raise RuntimeError("elapsed_time of an event that was never recorded")
        return end.time_ms - self.time_ms

    def synchronize(self):
        log.append(("event.synchronize", self.id))

    def query(self):
        return True


_default = Stream(ptr=0)
_current = [_default]


def current_stream(device=None):
    return _current[-1]


class stream:  # noqa: N801 (torch.cuda.stream's name)
    """with torch.cuda.stream(s): s is the current stream inside."""

    def __init__(self, s):
        self.s = s

    def __enter__(self):
        _current.append(self.s)
        log.append(("enter_stream", self.s.cuda_stream))

    def __exit__(self, *exc):
        _current.pop()
        log.append(("exit_stream", self.s.cuda_stream))


def synchronize(device=None):
    log.append(("synchronize",))
