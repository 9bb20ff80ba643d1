"""ctypes declarations of <uma/c/uma.h> (ABI version 1), declared once for every adapter.

Only this module knows the C layout: the structs, the enums and each function's prototype.
"""

import ctypes
import ctypes.util
import os
import warnings

ABI_VERSION = 1
DEVICE_HOST = -1
LIBRARY_NAME = "libuma_c.so"
# The files looked for in each folder: the SONAME of ABI_VERSION (libuma_c.so.1, all the runtime
# package libuma-c holds), then the linker's link libuma_c.so (libuma-dev; a build tree; a
# library built before it had a SONAME). docs/c_abi.md, "Versions".
LIBRARY_FILES = (f"{LIBRARY_NAME}.{ABI_VERSION}", LIBRARY_NAME)

# uma_status: 1..12 are uma's errc values, 64.. the C ABI's own.
STATUS_NAMES = {
    0: "UMA_OK",
    1: "UMA_ERR_OUT_OF_MEMORY",
    2: "UMA_ERR_QUOTA_EXCEEDED",
    3: "UMA_ERR_INVALID_ARGUMENT",
    4: "UMA_ERR_ALLOCATOR_STOPPED",
    5: "UMA_ERR_CAPTURE_IN_PROGRESS",
    6: "UMA_ERR_NOT_SUPPORTED",
    7: "UMA_ERR_NO_DEVICE",
    8: "UMA_ERR_BACKEND",
    9: "UMA_ERR_OVERFLOW",
    10: "UMA_ERR_CONTEXT_LOST",
    11: "UMA_ERR_UNRECOVERABLE",
    12: "UMA_ERR_TIMEOUT",
    64: "UMA_ERR_UNKNOWN_POINTER",
    65: "UMA_ERR_NULL_ARGUMENT",
    66: "UMA_ERR_BUFFER_TOO_SMALL",
}
STATUS = {name: value for value, name in STATUS_NAMES.items()}

BACKENDS = {"auto": 0, "host": 1, "cuda": 2}
POLICIES = {"direct": 0, "pool": 1}
ACCESS_MODES = {"read": 0, "write": 1}  # uma_access_mode
RESIDENCY_POLICIES = {"migrate": 0, "read_mostly": 1, "remote_map": 2, "discard": 3,
                      "auto": 4}  # uma_residency_policy
MAX_REPORTED_DEVICES = 16  # uma_residency_report.devices
ADVICE = {
    "set_read_mostly": 1,
    "unset_read_mostly": 2,
    "set_preferred_location": 3,
    "unset_preferred_location": 4,
    "set_accessed_by": 5,
    "unset_accessed_by": 6,
}


class Config(ctypes.Structure):
    """struct uma_config."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("backend", ctypes.c_int),
        ("policy", ctypes.c_int),
        ("quota_bytes", ctypes.c_uint64),
        ("device_budget_bytes", ctypes.c_uint64),
        ("max_block_bytes", ctypes.c_uint64),
        ("scheduler_threads", ctypes.c_uint32),
        ("host_devices", ctypes.c_uint32),
        ("host_device_bytes", ctypes.c_uint64),
        ("driver_counters", ctypes.c_uint32),
    ]

    @property
    def cache_max_bytes(self):
        """Deprecated (one release): max_block_bytes, the field's name since issue 38."""
        warnings.warn("uma_config.cache_max_bytes is max_block_bytes", DeprecationWarning,
                      stacklevel=2)
        return self.max_block_bytes

    @cache_max_bytes.setter
    def cache_max_bytes(self, value):
        warnings.warn("uma_config.cache_max_bytes is max_block_bytes", DeprecationWarning,
                      stacklevel=2)
        self.max_block_bytes = value


class Stats(ctypes.Structure):
    """struct uma_stats."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("generation", ctypes.c_uint64),
        ("quota_bytes", ctypes.c_uint64),
        ("live_bytes", ctypes.c_uint64),
        ("live_regions", ctypes.c_uint64),
        ("peak_bytes", ctypes.c_uint64),
        ("allocations", ctypes.c_uint64),
        ("releases", ctypes.c_uint64),
        ("cache_in_use_bytes", ctypes.c_uint64),
        ("cache_free_bytes", ctypes.c_uint64),
        ("cache_hits", ctypes.c_uint64),
        ("cache_misses", ctypes.c_uint64),
        ("prefetch_bytes", ctypes.c_uint64),
        ("discard_bytes", ctypes.c_uint64),
        ("cache_requested_bytes", ctypes.c_uint64),
        ("cache_blocks_in_use", ctypes.c_uint64),
        ("total_bytes_allocated", ctypes.c_uint64),
        ("prefetches", ctypes.c_uint64),
        ("advises", ctypes.c_uint64),
        ("discards", ctypes.c_uint64),
        ("inert_refusals", ctypes.c_uint64),
        ("pending_jobs", ctypes.c_uint64),
        ("advice_elided", ctypes.c_uint64),
        ("ranges_coalesced", ctypes.c_uint64),
        ("reserved_bytes", ctypes.c_uint64),
        ("pool_slabs", ctypes.c_uint64),  # layout only: always 0 (see RETIRED_STATS_FIELDS)
        ("live_leases", ctypes.c_uint64),
        ("leased_bytes", ctypes.c_uint64),
        ("fragmentation", ctypes.c_double),  # layout only: always 0
        ("resident_bytes", ctypes.c_uint64),
        ("residency_to_device_bytes", ctypes.c_uint64),
        ("residency_to_host_bytes", ctypes.c_uint64),
        ("driver_to_device_bytes", ctypes.c_uint64),
        ("driver_to_host_bytes", ctypes.c_uint64),
        ("driver_page_faults", ctypes.c_uint64),
        # Added with the tiers (issue 39): zero from a library that predates them.
        ("host_tier_bytes", ctypes.c_uint64),
        ("device_tier_bytes", ctypes.c_uint64),
        ("copy_to_device_bytes", ctypes.c_uint64),
        ("copy_to_host_bytes", ctypes.c_uint64),
        ("copy_other_bytes", ctypes.c_uint64),
        ("copies", ctypes.c_uint64),
    ]


class StopReport(ctypes.Structure):
    """struct uma_stop_report."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("regions_freed", ctypes.c_uint64),
        ("bytes_freed", ctypes.c_uint64),
        ("regions_leaked", ctypes.c_uint64),
        ("bytes_leaked", ctypes.c_uint64),
        ("blocks_outstanding", ctypes.c_uint64),
    ]


class Range(ctypes.Structure):
    """struct uma_range: bytes at ptr inside memory uma handed out."""

    _fields_ = [("ptr", ctypes.c_void_p), ("bytes", ctypes.c_size_t)]


class PlanOptions(ctypes.Structure):
    """struct uma_plan_options (uma_plan_options_init sets the defaults)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("device", ctypes.c_int),
        ("mode", ctypes.c_int),
        ("policy", ctypes.c_int),
        ("has_stream", ctypes.c_int),
        ("stream", ctypes.c_void_p),
        ("wait_complete", ctypes.c_int),
        ("cycle_bytes", ctypes.c_uint64),
        ("cycle_plans", ctypes.c_uint32),
        ("tenant", ctypes.c_char_p),
    ]


class PlanResult(ctypes.Structure):
    """struct uma_plan_result: the moves a plan queued."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("to_device_bytes", ctypes.c_uint64),
        ("to_host_bytes", ctypes.c_uint64),
        ("dropped_bytes", ctypes.c_uint64),
        ("discarded_bytes", ctypes.c_uint64),
        ("mapped_bytes", ctypes.c_uint64),
        ("placements", ctypes.c_uint32),
        ("evictions", ctypes.c_uint32),
    ]


class DeviceResidency(ctypes.Structure):
    """struct uma_device_residency."""

    _fields_ = [(name, ctypes.c_uint64) for name in
                ("memory_bytes", "budget_bytes", "resident_bytes", "peak_bytes", "held_bytes")]


class ResidencyReport(ctypes.Structure):
    """struct uma_residency_report (a struct that can grow: struct_size first)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("device_count", ctypes.c_uint32),
        ("devices", DeviceResidency * MAX_REPORTED_DEVICES),
        ("to_device_bytes", ctypes.c_uint64),
        ("to_host_bytes", ctypes.c_uint64),
        ("dropped_bytes", ctypes.c_uint64),
        ("discarded_bytes", ctypes.c_uint64),
        ("placements", ctypes.c_uint64),
        ("evictions", ctypes.c_uint64),
        ("refetches", ctypes.c_uint64),
        ("driver_counters_on", ctypes.c_int),
        ("driver_to_device_bytes", ctypes.c_uint64),
        ("driver_to_host_bytes", ctypes.c_uint64),
        ("driver_page_faults", ctypes.c_uint64),
        ("unplanned_bytes", ctypes.c_uint64),
        ("driver_fault_to_device_bytes", ctypes.c_uint64),
        ("driver_fault_to_host_bytes", ctypes.c_uint64),
        # Added with the tiers (issue 39): zero from a library that predates them.
        ("copy_to_device_bytes", ctypes.c_uint64),
        ("copy_to_host_bytes", ctypes.c_uint64),
    ]


class ArbiterClaim(ctypes.Structure):
    """struct uma_arbiter_claim (uma_arbiter_claim_init sets the defaults)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("device", ctypes.c_int),
        ("min_bytes", ctypes.c_uint64),
        ("wanted_bytes", ctypes.c_uint64),
        ("priority", ctypes.c_uint32),
        ("weight", ctypes.c_uint32),
        ("idle", ctypes.c_int),
    ]


# Members kept for the struct's layout only: the pool policy's own slabs are gone (its small
# requests are blocks of the block allocator, counted by live_leases), so they read 0 and the
# JSON has no such key.
RETIRED_STATS_FIELDS = ("pool_slabs", "fragmentation")
STATS_FIELDS = tuple(name for name, _ in Stats._fields_
                     if name != "struct_size" and name not in RETIRED_STATS_FIELDS)
STOP_REPORT_FIELDS = tuple(name for name, _ in StopReport._fields_ if name != "struct_size")
PLAN_RESULT_FIELDS = tuple(name for name, _ in PlanResult._fields_ if name != "struct_size")
DEVICE_RESIDENCY_FIELDS = tuple(name for name, _ in DeviceResidency._fields_)
RESIDENCY_FIELDS = tuple(name for name, _ in ResidencyReport._fields_
                         if name not in ("struct_size", "device_count", "devices"))
# The counters of the tiers and copies (issue 39), in STATS_FIELDS: a library older than the
# tiers reports none of them (its uma_stats is shorter: they read 0) nor has them in its JSON.
TIER_STATS_FIELDS = ("host_tier_bytes", "device_tier_bytes", "copy_to_device_bytes",
                     "copy_to_host_bytes", "copy_other_bytes", "copies")

_vp = ctypes.c_void_p
_st = ctypes.c_int  # uma_status
# name: (restype, argtypes)
PROTOTYPES = {
    "uma_config_init": (None, [ctypes.POINTER(Config)]),
    "uma_create": (_st, [ctypes.POINTER(Config), ctypes.POINTER(_vp)]),
    "uma_destroy": (_st, [_vp]),
    "uma_destroy_with_report": (_st, [_vp, ctypes.POINTER(StopReport)]),
    "uma_malloc": (_st, [_vp, ctypes.c_size_t, ctypes.c_int, _vp, ctypes.POINTER(_vp)]),
    "uma_free": (_st, [_vp, _vp, ctypes.c_size_t, ctypes.c_int, _vp]),
    "uma_prefetch": (_st, [_vp, _vp, ctypes.c_size_t, ctypes.c_int, _vp]),
    "uma_advise": (_st, [_vp, _vp, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]),
    "uma_discard": (_st, [_vp, _vp, ctypes.c_size_t, _vp]),
    "uma_get_stats": (_st, [_vp, ctypes.POINTER(Stats)]),
    "uma_stats_json": (_st, [_vp, ctypes.c_char_p, ctypes.c_size_t,
                             ctypes.POINTER(ctypes.c_size_t)]),
    "uma_set_quota": (_st, [_vp, ctypes.c_uint64]),
    "uma_trim": (_st, [_vp, ctypes.POINTER(ctypes.c_uint64)]),
    "uma_status_string": (ctypes.c_char_p, [ctypes.c_int]),
    "uma_last_error": (ctypes.c_char_p, []),
    "uma_default_allocator": (_st, [ctypes.POINTER(Config), ctypes.POINTER(_vp)]),
    "uma_torch_malloc": (_vp, [ctypes.c_ssize_t, ctypes.c_int, _vp]),
    "uma_torch_free": (None, [_vp, ctypes.c_ssize_t, ctypes.c_int, _vp]),
    "uma_torch_empty_cache": (None, []),
}

_ranges = ctypes.POINTER(Range)
_result = ctypes.POINTER(PlanResult)
# The plan calls of issue 25 (additions to ABI v1): declared where the library has them, so a
# library built before them still loads; calling one it lacks raises UMA_ERR_NOT_SUPPORTED
# (see plan_function).
PLAN_PROTOTYPES = {
    "uma_plan_options_init": (None, [ctypes.POINTER(PlanOptions)]),
    "uma_set_device_budget": (_st, [_vp, ctypes.c_int, ctypes.c_uint64]),
    "uma_will_access": (_st, [_vp, _ranges, ctypes.c_size_t, ctypes.POINTER(PlanOptions),
                              _result]),
    "uma_done_with": (_st, [_vp, _ranges, ctypes.c_size_t]),
    "uma_dead": (_st, [_vp, _ranges, ctypes.c_size_t, _result]),
    "uma_sequence_create": (_st, [_vp, ctypes.c_size_t, ctypes.POINTER(_vp)]),
    "uma_sequence_add_step": (_st, [_vp, _ranges, ctypes.c_size_t,
                                    ctypes.POINTER(PlanOptions)]),
    "uma_sequence_begin": (_st, [_vp, ctypes.c_size_t, _result]),
    "uma_sequence_finish": (_st, [_vp]),
    "uma_sequence_destroy": (_st, [_vp]),
    "uma_get_residency": (_st, [_vp, ctypes.POINTER(ResidencyReport)]),
    "uma_residency_json": (_st, [_vp, ctypes.c_char_p, ctypes.c_size_t,
                                 ctypes.POINTER(ctypes.c_size_t)]),
}

# The tiers and copy-engine moves of issue 39 (additions to ABI v1), declared where the library
# has them, as the plan calls are; calling one it lacks raises UMA_ERR_NOT_SUPPORTED (see
# uma_c.tiers.tier_function).
TIER_PROTOTYPES = {
    "uma_host_alloc": (_st, [_vp, ctypes.c_size_t, ctypes.POINTER(_vp)]),
    "uma_device_alloc": (_st, [_vp, ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(_vp)]),
    "uma_tier_free": (_st, [_vp, _vp]),
    "uma_copy": (_st, [_vp, _vp, _vp, ctypes.c_size_t, _vp]),
}

# PyTorch's memory tools and pools (issue 36; additions to ABI v1), declared where the library
# has them; uma_torch checks has_torch_tools before using them.
TORCH_OBSERVER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t,
                                  ctypes.c_int, _vp)
TORCH_PROTOTYPES = {
    "uma_torch_set_memory_fraction": (None, [ctypes.c_double, ctypes.c_int]),
    "uma_torch_spilled_bytes": (ctypes.c_uint64, []),
    "uma_torch_memory_stats_json": (_st, [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                                          ctypes.POINTER(ctypes.c_size_t)]),
    "uma_torch_live_json": (_st, [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                                  ctypes.POINTER(ctypes.c_size_t)]),
    "uma_torch_reset_peak_memory_stats": (_st, [ctypes.c_int]),
    "uma_torch_reset_accumulated_memory_stats": (_st, [ctypes.c_int]),
    "uma_torch_set_observer": (None, [TORCH_OBSERVER]),
    "uma_torch_pool_functions": (_st, [_vp, ctypes.POINTER(_vp), ctypes.POINTER(_vp)]),
}


# Joining the node's arbiter (additions to ABI v1), declared where the library has them;
# calling one it lacks raises UMA_ERR_NOT_SUPPORTED (see uma_c.arbiter.arbiter_function).
ARBITER_PROTOTYPES = {
    "uma_arbiter_claim_init": (None, [ctypes.POINTER(ArbiterClaim)]),
    "uma_arbiter_join": (_st, [_vp, ctypes.c_char_p, ctypes.c_char_p,
                               ctypes.POINTER(ArbiterClaim), ctypes.c_size_t,
                               ctypes.POINTER(_vp)]),
    "uma_arbiter_want": (_st, [_vp, ctypes.c_int, ctypes.c_uint64, ctypes.c_int]),
    "uma_arbiter_budget": (_st, [_vp, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]),
    "uma_arbiter_wait_budget": (_st, [_vp, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                                      ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64)]),
    "uma_arbiter_report_json": (_st, [_vp, ctypes.c_char_p, ctypes.c_size_t,
                                      ctypes.POINTER(ctypes.c_size_t)]),
    "uma_arbiter_leave": (None, [_vp]),
}


class LibraryNotFound(OSError):
    """libuma_c.so could not be found or loaded; the message lists where uma looked."""


def _installed_library_dirs(here):
    """The libdir an install put libuma_c.so in: `cmake --install` writes uma_c/_installed.py
    with its path relative to this package; a source checkout or a pip install has none."""
    try:
        from . import _installed
    except ImportError:
        return []
    return [os.path.normpath(os.path.join(here, _installed.LIBRARY_DIR))]


def _candidates():
    """Where libuma_c.so may be, in the order searched (see find_library)."""
    here = os.path.dirname(os.path.abspath(__file__))
    places = [here, os.path.dirname(here)] + _installed_library_dirs(here)
    places += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    return [os.path.join(p, name) for p in places for name in LIBRARY_FILES]


def find_library(path=None):
    """The path of libuma_c.so: `path` if given, else $UMA_LIBRARY, else the first of: beside
    this package, its parent folder, the libdir of the install this package came with, each
    folder of $LD_LIBRARY_PATH (in each, libuma_c.so.ABI_VERSION before libuma_c.so:
    LIBRARY_FILES), and last the system loader's own search (ldconfig's cache: then the name it
    gives is returned, which dlopen resolves). Raises LibraryNotFound naming what was tried."""
    explicit = path if path is not None else os.environ.get("UMA_LIBRARY")
    if explicit:
        if not os.path.isfile(explicit):
            origin = "path argument" if path is not None else "UMA_LIBRARY"
            raise LibraryNotFound(f"uma: {origin} names {explicit!r}, which is not a file")
        return os.path.abspath(explicit)
    tried = _candidates()
    for candidate in tried:
        if os.path.isfile(candidate):
            return candidate
    system = ctypes.util.find_library("uma_c")
    if system:
        return system
    raise LibraryNotFound(
        f"uma: {LIBRARY_NAME} not found; set UMA_LIBRARY to its path (tried: {', '.join(tried)}, "
        "and the system loader's cache)")


def load(path):
    """Loads the library at `path` (from find_library: a path, or the bare name) with every
    prototype declared. The same path gives the same handle as the dlopen PyTorch makes, so both
    see one process-wide default allocator."""
    try:
        lib = ctypes.CDLL(path)
    except OSError as error:
        raise LibraryNotFound(f"uma: cannot load {path}: {error}") from error
    missing = [name for name in PROTOTYPES if not hasattr(lib, name)]
    if missing:
        raise LibraryNotFound(f"uma: {path} lacks {', '.join(missing)}: not a uma C ABI "
                              f"v{ABI_VERSION} library")
    optional = list(PLAN_PROTOTYPES.items()) + list(TIER_PROTOTYPES.items()) + \
        list(TORCH_PROTOTYPES.items()) + list(ARBITER_PROTOTYPES.items())
    for name, (restype, argtypes) in list(PROTOTYPES.items()) + optional:
        if name in PROTOTYPES or hasattr(lib, name):
            function = getattr(lib, name)
            function.restype = restype
            function.argtypes = argtypes
    return lib


def has_plans(lib):
    """Whether the loaded library has every plan call (PLAN_PROTOTYPES)."""
    return all(hasattr(lib, name) for name in PLAN_PROTOTYPES)


def has_tiers(lib):
    """Whether the loaded library has the host tier, device memory and uma_copy
    (TIER_PROTOTYPES; issue 39)."""
    return all(hasattr(lib, name) for name in TIER_PROTOTYPES)


def has_torch_tools(lib):
    """Whether the loaded library has PyTorch's memory tools and pools (TORCH_PROTOTYPES;
    issue 36)."""
    return all(hasattr(lib, name) for name in TORCH_PROTOTYPES)


def has_arbiter(lib):
    """Whether the loaded library can join a node's arbiter (ARBITER_PROTOTYPES)."""
    return all(hasattr(lib, name) for name in ARBITER_PROTOTYPES)
