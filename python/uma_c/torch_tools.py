"""PyTorch's memory tools and pools through the C ABI (issue 36; docs/frameworks.md "PyTorch's
memory tools"): the global install's figures in torch.cuda.memory_stats()' keys, the blocks
PyTorch holds, an observer of every hook call, and a pool's pluggable-allocator functions.
Allocator inherits TorchCalls; the rest are functions of the loaded library (the hooks count
per process, not per allocator)."""

import ctypes
import json

from . import binding
from .errors import check_status as _check, optional_function


def torch_function(lib, name):
    """The C function `name` of TORCH_PROTOTYPES (errors.optional_function)."""
    return optional_function(lib, name, "PyTorch's memory tools and pools (issue 36)")


def _device(device):
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        raise ValueError(f"uma: device must be a non-negative int, not {device!r}")
    return device


def _json_of(lib, name, device):
    function = torch_function(lib, name)
    needed = ctypes.c_size_t()
    status = function(_device(device), None, 0, ctypes.byref(needed))
    if status == binding.STATUS["UMA_ERR_BUFFER_TOO_SMALL"]:
        buffer = ctypes.create_string_buffer(needed.value + 1024)  # it may grow meanwhile
        status = function(device, buffer, len(buffer), ctypes.byref(needed))
    _check(lib, name, status)
    return json.loads(buffer.value.decode())


def memory_stats(lib, device):
    """The hooks' figures on `device` in torch.cuda.memory_stats()' flat keys, as a dict."""
    return _json_of(lib, "uma_torch_memory_stats_json", device)


def live_blocks(lib, device):
    """[{"address", "size", "stream"}]: the blocks the hooks handed PyTorch on `device` and it
    still holds, by address."""
    return _json_of(lib, "uma_torch_live_json", device)


def spilled_bytes(lib):
    """The bytes of the blocks the hooks placed on the host past the memory fraction."""
    return int(torch_function(lib, "uma_torch_spilled_bytes")())


def reset_peak_memory_stats(lib, device):
    _check(lib, "uma_torch_reset_peak_memory_stats",
           torch_function(lib, "uma_torch_reset_peak_memory_stats")(_device(device)))


def reset_accumulated_memory_stats(lib, device):
    _check(lib, "uma_torch_reset_accumulated_memory_stats",
           torch_function(lib, "uma_torch_reset_accumulated_memory_stats")(_device(device)))


def set_observer(lib, callback):
    """Calls callback(action, address, size, device, stream) after every hook call (action:
    "alloc", "free" or "oom"), on the allocating thread; None stops it. Returns the C callback
    object, which must stay referenced while set."""
    function = torch_function(lib, "uma_torch_set_observer")
    if callback is None:
        function(ctypes.cast(None, binding.TORCH_OBSERVER))
        return None
    names = {0: "alloc", 1: "free", 2: "oom"}

    def observe(action, address, size, device, stream):
        try:
            callback(names.get(action, str(action)), address, size, device, stream or 0)
        except Exception:  # noqa: BLE001 -- an observer must not unwind through C++
            pass

    c_callback = binding.TORCH_OBSERVER(observe)
    function(c_callback)
    return c_callback


class TorchCalls:
    """The pool method of uma_c.Allocator (it provides _lib and _live())."""

    def torch_pool_functions(self):
        """(malloc, free): addresses of PyTorch pluggable-allocator functions that serve from
        this allocator (torch._C._cuda_customAllocator takes them). Binds one of 16 slots for
        the rest of the process: do not close this allocator after."""
        malloc_fn, free_fn = ctypes.c_void_p(), ctypes.c_void_p()
        status = torch_function(self._lib, "uma_torch_pool_functions")(
            self._live(), ctypes.byref(malloc_fn), ctypes.byref(free_fn))
        _check(self._lib, "uma_torch_pool_functions", status)
        return malloc_fn.value, free_fn.value
