"""A uma allocator through the C ABI: the one class both framework adapters build on."""

import ctypes
import threading
import warnings

from . import binding
from .arbiter import ArbiterCalls
from .errors import check_status as _check
from .plans import PlanCalls
from .tiers import TierCalls
from .torch_tools import TorchCalls

_libraries = {}
_libraries_lock = threading.Lock()

# Keyword arguments of make_config and the uma_config field each one sets.
CONFIG_FIELDS = ("backend", "policy", "quota_bytes", "device_budget_bytes", "max_block_bytes",
                 "scheduler_threads", "host_devices", "host_device_bytes", "driver_counters")
# Old keywords, accepted for one release with a DeprecationWarning: the field each one now is.
DEPRECATED_CONFIG_FIELDS = {"cache_max_bytes": "max_block_bytes"}
_UINT_LIMITS = {"quota_bytes": 2**64 - 1, "device_budget_bytes": 2**64 - 1,
                "max_block_bytes": 2**64 - 1, "scheduler_threads": 2**32 - 1,
                "host_devices": 2**32 - 1, "host_device_bytes": 2**64 - 1, "driver_counters": 1}


def library(path=None):
    """The loaded C ABI (one handle per path, loaded once). See binding.find_library."""
    resolved = binding.find_library(path)
    with _libraries_lock:
        if resolved not in _libraries:
            _libraries[resolved] = binding.load(resolved)
        return resolved, _libraries[resolved]


def _enum_value(field, value, table):
    if isinstance(value, str) and value in table:
        return table[value]
    if isinstance(value, int) and not isinstance(value, bool) and value in table.values():
        return value
    raise ValueError(f"uma: {field}={value!r} is not one of {', '.join(table)}")


def _uint_value(field, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"uma: {field} must be an int, not {type(value).__name__}")
    if not 0 <= value <= _UINT_LIMITS[field]:
        raise ValueError(f"uma: {field}={value} is out of range 0..{_UINT_LIMITS[field]}")
    return value


def config_options(options, stacklevel=3):
    """`options` (a dict of config keywords) with each deprecated keyword under its new name,
    warning once per keyword (DeprecationWarning); TypeError when both names are given. The
    entry points that keep the options (uma_torch.install, uma_cupy.install) call it first."""
    renamed = dict(options)
    for old, new in DEPRECATED_CONFIG_FIELDS.items():
        if old not in renamed:
            continue
        if new in renamed:
            raise TypeError(f"uma: {old} is the old name of {new}; give {new} only")
        warnings.warn(f"uma: the config option {old} is {new} (the old name goes in the next "
                      "release)", DeprecationWarning, stacklevel=stacklevel)
        renamed[new] = renamed.pop(old)
    return renamed


def make_config(lib, **options):
    """A uma_config: the C defaults (uma_config_init), then each option given and not None.
    Unknown options and bad values raise before anything is created; a deprecated keyword
    (DEPRECATED_CONFIG_FIELDS) is taken under its new name with a DeprecationWarning."""
    options = config_options(options)
    unknown = sorted(set(options) - set(CONFIG_FIELDS))
    if unknown:
        raise TypeError(f"uma: unknown config option(s) {', '.join(unknown)}; "
                        f"known: {', '.join(CONFIG_FIELDS)}")
    config = binding.Config()
    lib.uma_config_init(ctypes.byref(config))
    for field, value in options.items():
        if value is None:
            continue
        if field == "backend":
            value = _enum_value(field, value, binding.BACKENDS)
        elif field == "policy":
            value = _enum_value(field, value, binding.POLICIES)
        else:
            value = _uint_value(field, value)
        setattr(config, field, value)
    return config


def _pointer(ptr, what="ptr"):
    if isinstance(ptr, bool) or not isinstance(ptr, int) or ptr < 0:
        raise TypeError(f"uma: {what} must be a non-negative int address, not {ptr!r}")
    return ptr


def _size(size, what="size"):
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"uma: {what} must be a non-negative int, not {size!r}")
    return size


def _stream(stream):
    """A stream as an address: None or 0 is the legacy default stream."""
    if stream is None:
        return None
    return _pointer(stream, "stream") or None


def _device(device):
    if isinstance(device, bool) or not isinstance(device, int) or device < binding.DEVICE_HOST:
        raise ValueError(f"uma: device must be an int >= {binding.DEVICE_HOST} (the host), "
                         f"not {device!r}")
    return device


def _advice(advice):
    return _enum_value("advice", advice, binding.ADVICE)


class Allocator(PlanCalls, TierCalls, TorchCalls, ArbiterCalls):
    """One uma allocator (`uma_allocator*`). Made by create() (its own, destroyed by close())
    or default() (the process-wide one PyTorch's hooks use, never destroyed from Python).
    Every method raises UmaError (UmaMemoryError for memory statuses) on a failing status.
    The residency plans (set_device_budget, will_access, done_with, dead, sequence, residency)
    come from uma_c.plans.PlanCalls; the host tier, device memory and copies (host_alloc,
    device_alloc, tier_free, copy, has_tiers) from uma_c.tiers.TierCalls; join_arbiter (a
    membership of the node's arbiter) from uma_c.arbiter.ArbiterCalls."""

    def __init__(self, lib, handle, path, owned):
        self._lib = lib
        self._handle = handle
        self.path = path
        self.owned = owned
        # The device each block from malloc was asked for, so that free finds it itself
        # (uma_free refuses another device). One dict operation at a time: atomic in CPython.
        self._devices = {}

    @classmethod
    def create(cls, path=None, **options):
        """A new allocator from `options` (see CONFIG_FIELDS); close() stops it."""
        path, lib = library(path)
        config = make_config(lib, **options)
        handle = ctypes.c_void_p()
        _check(lib, "uma_create", lib.uma_create(ctypes.byref(config), ctypes.byref(handle)))
        return cls(lib, handle.value, path, owned=True)

    @classmethod
    def default(cls, path=None, **options):
        """The process-wide default allocator. With no option given, the C library builds it
        from its defaults and the UMA_* environment; with options, from those. Once it exists,
        a call with other options fails with UMA_ERR_INVALID_ARGUMENT."""
        path, lib = library(path)
        given = {key: value for key, value in options.items() if value is not None}
        config = ctypes.byref(make_config(lib, **given)) if given else None
        handle = ctypes.c_void_p()
        status = lib.uma_default_allocator(config, ctypes.byref(handle))
        _check(lib, "uma_default_allocator", status)
        return cls(lib, handle.value, path, owned=False)

    def _live(self):
        if self._handle is None:
            raise ValueError("uma: this Allocator was closed")
        return self._handle

    def malloc(self, size, device=0, stream=None):
        """The address of `size` bytes of managed memory for `device` ordered on `stream`
        (0 for size 0). Raises UmaMemoryError when the quota or the device cannot hold it."""
        out = ctypes.c_void_p()
        status = self._lib.uma_malloc(self._live(), _size(size), _device(device), _stream(stream),
                                      ctypes.byref(out))
        _check(self._lib, "uma_malloc", status)
        if out.value:
            self._devices[out.value] = device
        return out.value or 0

    def free(self, ptr, size=0, device=None, stream=None):
        """Gives back a block from malloc. `size` 0 is not checked, else it must be the block's;
        `device` None (the default) is the device malloc was given for this block through this
        Allocator (0 for a block it did not hand out), else it must be that device; `stream` is
        the stream the block's last use was ordered on. Raises UmaError (UMA_ERR_UNKNOWN_POINTER
        for a pointer uma does not hold, UMA_ERR_INVALID_ARGUMENT for a wrong size or device);
        a refused free leaves the block live."""
        ptr = _pointer(ptr)
        # Taken out before the C call: until it returns, the block is live and no malloc can
        # hand its address out again; put back when the free is refused.
        known = self._devices.pop(ptr, None)
        if device is None:
            device = 0 if known is None else known
        status = self._lib.uma_free(self._live(), ptr, _size(size), _device(device),
                                    _stream(stream))
        if status and known is not None:
            self._devices[ptr] = known
        _check(self._lib, "uma_free", status)

    def unchecked_calls(self):
        """(malloc(size, device, stream) -> address, free(ptr, size, device, stream)) for an
        adapter's hot path: plain ints straight to the C calls, without the argument checks of
        malloc/free (the framework hands valid ints). A failing status still raises UmaError.
        Valid while this Allocator is open."""
        lib, handle = self._lib, self._live()
        c_malloc, c_free, byref, void_p = lib.uma_malloc, lib.uma_free, ctypes.byref, \
            ctypes.c_void_p

        def malloc(size, device, stream):
            out = void_p()
            status = c_malloc(handle, size, device, stream, byref(out))
            if status:
                _check(lib, "uma_malloc", status)
            return out.value or 0

        def free(ptr, size, device, stream):
            status = c_free(handle, ptr, size, device, stream)
            if status:
                _check(lib, "uma_free", status)

        return malloc, free

    def prefetch(self, ptr, nbytes, device, stream=None):
        """Migrates [ptr, ptr+nbytes) to `device` (DEVICE_HOST: the host) on `stream`."""
        status = self._lib.uma_prefetch(self._live(), _pointer(ptr), _size(nbytes, "nbytes"),
                                        _device(device), _stream(stream))
        _check(self._lib, "uma_prefetch", status)

    def advise(self, ptr, nbytes, advice, device):
        """cudaMemAdvise for the range; `advice` a name of binding.ADVICE or its value."""
        status = self._lib.uma_advise(self._live(), _pointer(ptr), _size(nbytes, "nbytes"),
                                      _advice(advice), _device(device))
        _check(self._lib, "uma_advise", status)

    def discard(self, ptr, nbytes, stream=None):
        """Tells uma the range's contents are no longer needed."""
        status = self._lib.uma_discard(self._live(), _pointer(ptr), _size(nbytes, "nbytes"),
                                       _stream(stream))
        _check(self._lib, "uma_discard", status)

    def stats(self):
        """The counters (uma_stats) as a dict, without struct_size."""
        out = binding.Stats()
        out.struct_size = ctypes.sizeof(binding.Stats)
        _check(self._lib, "uma_get_stats", self._lib.uma_get_stats(self._live(), ctypes.byref(out)))
        return {name: getattr(out, name) for name in binding.STATS_FIELDS}

    def stats_json(self):
        """The counters as the JSON text of `uma stats --json`."""
        needed = ctypes.c_size_t(0)
        buffer = ctypes.create_string_buffer(1)
        status = self._lib.uma_stats_json(self._live(), None, 0, ctypes.byref(needed))
        while status == binding.STATUS["UMA_ERR_BUFFER_TOO_SMALL"]:
            buffer = ctypes.create_string_buffer(needed.value)
            status = self._lib.uma_stats_json(self._live(), buffer, len(buffer),
                                              ctypes.byref(needed))
        _check(self._lib, "uma_stats_json", status)
        return buffer.value.decode()

    def quota(self):
        """The quota in bytes (bytes the allocator may hold from the backend)."""
        return self.stats()["quota_bytes"]

    def set_quota(self, quota_bytes):
        """Changes the quota; refused (UMA_ERR_INVALID_ARGUMENT) below what is held now."""
        status = self._lib.uma_set_quota(self._live(), _uint_value("quota_bytes", quota_bytes))
        _check(self._lib, "uma_set_quota", status)

    def trim(self):
        """Gives idle cached memory back (uma_trim): the block allocator's slabs whose blocks
        are all free and finished on their streams go back to the backend. Returns the bytes of
        the slabs given back."""
        released = ctypes.c_uint64(0)
        _check(self._lib, "uma_trim", self._lib.uma_trim(self._live(), ctypes.byref(released)))
        return released.value

    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Stops an allocator made by create() and returns what the stop did (uma_stop_report
        as a dict; None if it was closed already). Blocks still out become inert: leaked and
        reported, never freed under a user. The default allocator cannot be closed."""
        if not self.owned:
            raise ValueError("uma: the process-wide default allocator is not closed from Python")
        if self._handle is None:
            return None
        self._leave_arbiters()  # their budgets apply to this allocator: they go first
        handle, self._handle = self._handle, None
        self._devices.clear()
        report = binding.StopReport()
        report.struct_size = ctypes.sizeof(binding.StopReport)
        status = self._lib.uma_destroy_with_report(handle, ctypes.byref(report))
        _check(self._lib, "uma_destroy_with_report", status)
        return {name: getattr(report, name) for name in binding.STOP_REPORT_FIELDS}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.owned:
            self.close()
