"""uma as PyTorch's CUDA allocator (pure Python, no build step).

    import uma_torch
    uma_torch.install(quota_bytes=40 << 30)   # before anything touches CUDA
    x = torch.empty(1 << 20, device="cuda")   # uma-owned managed memory
    uma_torch.prefetch(x, device=0)
    print(uma_torch.stats())
    with uma_torch.offload(model, optimizer, budget_bytes=2 << 30):  # state beyond the budget
        train(model, optimizer)
    with uma_torch.offload(model, budget_bytes=2 << 30), torch.no_grad():  # inference: layers
        model.generate(tokens)                                             # beyond it stream
    member = uma_torch.join_arbiter("unix:/run/uma/uma.sock", "train", wanted_bytes=60 << 30)

install() loads libuma_c.so (UMA_LIBRARY, else beside the package or on LD_LIBRARY_PATH),
configures uma's process-wide default allocator and hands PyTorch the library's
uma_torch_malloc/uma_torch_free through torch.cuda.memory.CUDAPluggableAllocator. See
docs/frameworks.md.
"""

import ctypes
import threading

import uma_c
from uma_c.adapter import allocator_functions
from uma_c import DEVICE_HOST, UmaError, UmaMemoryError

from .arbiter import join_arbiter
from .backward_step import StepInBackwardError
from .memory import (dump_snapshot, max_memory_allocated, max_memory_reserved, memory_allocated,
                     memory_reserved, memory_snapshot, memory_stats, record_memory_history,
                     reset_accumulated_memory_stats, reset_peak_memory_stats, spilled_bytes)
from .offload import Offload, OffloadError, offload
from .pool import Pool, PoolError, pool, pool_of, pools
from .streaming import StreamedInference, StreamingError

__version__ = uma_c.__version__  # one version for uma's packages (CHANGELOG.md)

__all__ = ["InstallError", "Offload", "OffloadError", "Pool", "PoolError", "StepInBackwardError",
           "StreamedInference", "StreamingError", "UmaError", "UmaMemoryError", "advise",
           "allocator", "discard", "dump_snapshot", "install", "is_installed", "join_arbiter",
           "library_path", "max_memory_allocated", "max_memory_reserved", "memory_allocated",
           "memory_reserved", "memory_snapshot", "memory_stats", "offload", "pool", "pool_of",
           "pools", "prefetch",
           "quota", "record_memory_history", "reset_accumulated_memory_stats",
           "reset_peak_memory_stats", "residency", "set_quota", "spilled_bytes", "stats",
           "stats_json", "trim"]

MALLOC_SYMBOL = "uma_torch_malloc"
FREE_SYMBOL = "uma_torch_free"
EMPTY_CACHE_SYMBOL = "uma_torch_empty_cache"
MEMORY_FRACTION_SYMBOL = "uma_torch_set_memory_fraction"

_lock = threading.Lock()
_state = {}  # "allocator", "options", "pluggable" once installed


class InstallError(RuntimeError):
    """install() refused: PyTorch is missing or too old, CUDA was already initialised, or uma
    is installed already with other options. Nothing was changed."""


def _import_torch():
    try:
        import torch
    except ImportError as error:
        raise InstallError(f"uma_torch.install: PyTorch is not importable ({error}); "
                           "install a CUDA build of PyTorch") from error
    memory = getattr(getattr(torch, "cuda", None), "memory", None)
    if memory is None or not hasattr(memory, "CUDAPluggableAllocator") \
            or not hasattr(memory, "change_current_allocator"):
        raise InstallError("uma_torch.install: this PyTorch has no "
                           "torch.cuda.memory.CUDAPluggableAllocator (PyTorch >= 2.0 needed)")
    return torch


def _refuse_if_cuda_initialised(torch):
    if torch.cuda.is_initialized():
        raise InstallError(
            "uma_torch.install: CUDA is already initialised in this process, so PyTorch's "
            "allocator can no longer be swapped; call uma_torch.install() first, before any "
            "tensor is put on a cuda device and before torch.cuda.init()")


def install(library=None, **options):
    """Makes uma PyTorch's CUDA allocator for this process. `options` configure uma's default
    allocator (uma_c.CONFIG_FIELDS: backend, policy, quota_bytes, device_budget_bytes,
    max_block_bytes, scheduler_threads, host_devices, host_device_bytes, driver_counters; the
    old cache_max_bytes is max_block_bytes, with a DeprecationWarning, for one release); none
    given: its defaults and the UMA_* environment.
    Returns the uma_c.Allocator. A second call with the same options returns it again.
    Raises InstallError (nothing changed), uma_c.LibraryNotFound, UmaError, TypeError or
    ValueError for a bad option."""
    options = uma_c.config_options(options)  # deprecated keywords under their new names
    with _lock:
        if _state:
            if options != _state["options"] or (library is not None
                                                and uma_c.find_library(library) != _state["path"]):
                raise InstallError("uma_torch.install: uma is installed already with "
                                   f"{_state['options'] or 'default options'}; it cannot be "
                                   "reinstalled with others in the same process")
            return _state["allocator"]
        torch = _import_torch()
        _refuse_if_cuda_initialised(torch)
        path, lib = uma_c.library(library)
        uma_c.make_config(lib, **options)  # validates every option before any state changes
        allocator = uma_c.Allocator.default(path, **options)
        pluggable = torch.cuda.memory.CUDAPluggableAllocator(path, MALLOC_SYMBOL, FREE_SYMBOL)
        _hook_empty_cache(pluggable, lib)
        _hook_memory_fraction(pluggable, lib)
        _name_the_pool_in_graph_errors(torch)
        try:
            torch.cuda.memory.change_current_allocator(pluggable)
        except RuntimeError as error:
            raise InstallError(f"uma_torch.install: PyTorch refused the allocator: {error}") \
                from error
        _state.update(allocator=allocator, options=dict(options), pluggable=pluggable, path=path,
                      lib=lib)
        return allocator


def _hook_empty_cache(pluggable, lib):
    """torch.cuda.empty_cache() calls the pluggable allocator's reset function: uma_trim on the
    default allocator. A PyTorch without the hook keeps working; uma_torch.trim() does it."""
    inner = getattr(pluggable, "allocator", None)
    inner = inner() if callable(inner) else None
    setter = getattr(inner, "set_reset_fn", None)
    if setter is not None:
        setter(ctypes.cast(getattr(lib, EMPTY_CACHE_SYMBOL), ctypes.c_void_p).value)


def _hook_memory_fraction(pluggable, lib):
    """torch.cuda.set_per_process_memory_fraction(f, d) calls the pluggable allocator's
    memory-fraction function: uma_torch_set_memory_fraction makes f x the device's memory uma's
    residency budget of d (what does not fit is kept on the host, not refused)."""
    inner = getattr(pluggable, "allocator", None)
    inner = inner() if callable(inner) else None
    setter = getattr(inner, "set_memory_fraction_fn", None)
    if setter is not None and hasattr(lib, MEMORY_FRACTION_SYMBOL):
        setter(ctypes.cast(getattr(lib, MEMORY_FRACTION_SYMBOL), ctypes.c_void_p).value)


GRAPH_TREES_REFUSAL = (
    "uma_torch: torch.compile(mode=\"reduce-overhead\") runs CUDA graph trees, which need "
    "PyTorch's own allocator, and uma_torch.install() replaced it for the whole process; put "
    "the model's state in a uma_torch.pool() and leave PyTorch's allocator installed (graphs "
    "and reduce-overhead work there: docs/frameworks.md \"CUDA graphs\"), or compile with "
    "mode=\"default\" or \"max-autotune-no-cudagraphs\" under the install")


def _name_the_pool_in_graph_errors(torch):
    """PyTorch's CUDA graph trees ask the allocator which blocks of their pool are alive
    (torch._C._cuda_checkPoolLiveAllocations), which a pluggable allocator cannot answer
    (pytorch#163257: "pluggable does not yet support checkPoolLiveAllocations"). That refusal
    is re-raised naming the way that works."""
    original = getattr(getattr(torch, "_C", None), "_cuda_checkPoolLiveAllocations", None)
    if original is None or getattr(original, "uma_wrapped", False):
        return

    def check_pool_live_allocations(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        except RuntimeError as error:
            raise RuntimeError(f"{GRAPH_TREES_REFUSAL} (PyTorch: {error})") from error
    check_pool_live_allocations.uma_wrapped = True
    torch._C._cuda_checkPoolLiveAllocations = check_pool_live_allocations


def is_installed():
    """Whether install() succeeded in this process."""
    return bool(_state)


def allocator():
    """The uma_c.Allocator install() set up; raises InstallError before install()."""
    if not _state:
        raise InstallError("uma_torch: install() has not been called in this process")
    return _state["allocator"]


def library_path():
    """The path of the libuma_c.so PyTorch allocates through."""
    allocator()
    return _state["path"]


stats, stats_json, quota, set_quota, trim = allocator_functions(allocator)


def residency():
    """uma's residency report (uma_get_residency) as a dict: per device its memory, budget,
    resident, peak and held bytes; uma's moves; the driver's counters."""
    return allocator().residency()


def _storage_range(tensor):
    """(address, bytes) of the whole storage behind `tensor` (views included)."""
    if not getattr(tensor, "is_cuda", False):
        raise ValueError(f"uma_torch: the tensor is on {getattr(tensor, 'device', '?')}, not a "
                         "cuda device; only CUDA tensors live in uma's memory")
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def _target_device(device, tensor):
    if device is None:
        return tensor.device.index if tensor.device.index is not None else 0
    if device == "cpu" or device == DEVICE_HOST:
        return DEVICE_HOST
    if isinstance(device, str) and device.startswith("cuda"):
        return int(device.partition(":")[2] or 0)
    if hasattr(device, "type"):  # torch.device
        return DEVICE_HOST if device.type == "cpu" else (device.index or 0)
    return device


def _stream_of(stream, tensor):
    if stream is None:
        import torch
        return torch.cuda.current_stream(tensor.device).cuda_stream
    return getattr(stream, "cuda_stream", stream)


def prefetch(tensor, device=None, stream=None):
    """Migrates the tensor's storage to `device` (an index, "cuda:N", "cpu" or a torch.device;
    None: the tensor's own) on `stream` (None: the current stream). Empty storage: nothing."""
    ptr, nbytes = _storage_range(tensor)
    if nbytes:
        allocator().prefetch(ptr, nbytes, _target_device(device, tensor),
                             _stream_of(stream, tensor))


def advise(tensor, advice, device=None):
    """cudaMemAdvise on the tensor's storage; `advice` e.g. "set_read_mostly",
    "set_preferred_location" (uma_c.ADVICE), `device` as for prefetch."""
    ptr, nbytes = _storage_range(tensor)
    if nbytes:
        allocator().advise(ptr, nbytes, advice, _target_device(device, tensor))


def discard(tensor, stream=None):
    """Tells uma the storage's contents are no longer needed (its pages may be dropped)."""
    ptr, nbytes = _storage_range(tensor)
    if nbytes:
        allocator().discard(ptr, nbytes, _stream_of(stream, tensor))
