"""uma's C ABI (<uma/c/uma.h>) through ctypes: the binding both framework adapters share.

    from uma_c import Allocator
    with Allocator.create(backend="host", quota_bytes=1 << 30) as a:
        p = a.malloc(65536)
        a.free(p, 65536)
"""

__version__ = "0.1.0"

from .allocator import (CONFIG_FIELDS, DEPRECATED_CONFIG_FIELDS, Allocator, config_options,
                        library, make_config)
from .arbiter import CLAIM_FIELDS, ArbiterMember
from .binding import (ABI_VERSION, ACCESS_MODES, ADVICE, DEVICE_HOST, PLAN_RESULT_FIELDS,
                      RESIDENCY_POLICIES, STATS_FIELDS, STATUS, STATUS_NAMES,
                      STOP_REPORT_FIELDS, TIER_STATS_FIELDS, LibraryNotFound, find_library)
from .errors import UmaError, UmaMemoryError, UmaTimeoutError
from .plans import Sequence

__all__ = ["ABI_VERSION", "ACCESS_MODES", "ADVICE", "Allocator", "ArbiterMember", "CLAIM_FIELDS",
           "CONFIG_FIELDS", "DEPRECATED_CONFIG_FIELDS", "DEVICE_HOST", "LibraryNotFound",
           "PLAN_RESULT_FIELDS", "RESIDENCY_POLICIES", "STATS_FIELDS", "STATUS", "STATUS_NAMES",
           "STOP_REPORT_FIELDS", "Sequence", "TIER_STATS_FIELDS", "UmaError", "UmaMemoryError",
           "UmaTimeoutError", "config_options", "find_library", "library", "make_config"]
