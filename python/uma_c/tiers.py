"""The host tier, device memory and copy-engine moves through the C ABI (issue 39): pinned host
memory (uma_host_alloc) and plain device memory (uma_device_alloc) owned by the allocator, freed
by uma_tier_free, and uma_copy between any memory of the allocator on a stream. Allocator
inherits TierCalls.

Neither kind of memory migrates, and plans, prefetch, advice and discard refuse both
(UMA_ERR_INVALID_ARGUMENT): device memory is resident for its whole life and charged to the
device's budget; the host tier is the home of data that does not fit that budget.
"""

import ctypes

from . import binding
from .errors import check_status as _check, optional_function


def tier_function(lib, name):
    """The C function `name` of TIER_PROTOTYPES (errors.optional_function)."""
    return optional_function(lib, name, "the host tier and uma_copy (issue 39)")


def _address(value, what):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TypeError(f"uma: {what} must be a positive int address, not {value!r}")
    return value


def _bytes(value, what):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"uma: {what} must be a non-negative int, not {value!r}")
    return value


def stream_address(stream):
    """A stream as the address the C calls take: None or 0 is the legacy default stream; an
    int is an address; an object with `cuda_stream` (torch) or `ptr` (CuPy) gives its own."""
    if stream is None:
        return None
    address = getattr(stream, "cuda_stream", getattr(stream, "ptr", stream))
    if isinstance(address, bool) or not isinstance(address, int) or address < 0:
        raise TypeError(f"uma: stream must be an int address or have cuda_stream/ptr, not "
                        f"{stream!r}")
    return address or None


class TierCalls:
    """The tier methods of uma_c.Allocator (it provides _lib and _live())."""

    def has_tiers(self):
        """Whether this library has the host tier and uma_copy (one older than issue 39 has
        not)."""
        return binding.has_tiers(self._lib)

    def host_alloc(self, size):
        """The address of `size` bytes of pinned host memory owned by uma (the host tier),
        under the quota. Over the quota: UmaMemoryError (UMA_ERR_QUOTA_EXCEEDED)."""
        out = ctypes.c_void_p()
        status = tier_function(self._lib, "uma_host_alloc")(self._live(), _bytes(size, "size"),
                                                            ctypes.byref(out))
        _check(self._lib, "uma_host_alloc", status)
        return out.value or 0

    def device_alloc(self, size, device=0):
        """The address of `size` bytes of device memory on `device` owned by uma: resident for
        its whole life and charged to the device's budget. No room in the budget (after
        evicting unheld managed data) or the quota: UmaMemoryError (UMA_ERR_QUOTA_EXCEEDED)."""
        if isinstance(device, bool) or not isinstance(device, int) or device < 0:
            raise ValueError(f"uma: device must be a device index >= 0, not {device!r}")
        out = ctypes.c_void_p()
        status = tier_function(self._lib, "uma_device_alloc")(
            self._live(), _bytes(size, "size"), device, ctypes.byref(out))
        _check(self._lib, "uma_device_alloc", status)
        return out.value or 0

    def tier_free(self, ptr):
        """Frees what host_alloc or device_alloc returned (ordered after the device's work).
        Anything else: UmaError (UMA_ERR_UNKNOWN_POINTER)."""
        status = tier_function(self._lib, "uma_tier_free")(self._live(), _address(ptr, "ptr"))
        _check(self._lib, "uma_tier_free", status)

    def copy(self, dst, src, nbytes, stream=None):
        """Copies `nbytes` from `src` to `dst` on the copy engines, ordered on `stream` (an int
        address, an object with `cuda_stream`/`ptr`, or None: the legacy default stream);
        returns once the copy is enqueued. Each range must lie inside one live block of this
        allocator (a tier block or a malloc block): else UmaError (UMA_ERR_UNKNOWN_POINTER or
        UMA_ERR_INVALID_ARGUMENT). nbytes 0: nothing."""
        status = tier_function(self._lib, "uma_copy")(
            self._live(), _address(dst, "dst"), _address(src, "src"), _bytes(nbytes, "nbytes"),
            stream_address(stream))
        _check(self._lib, "uma_copy", status)
