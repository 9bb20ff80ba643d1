"""uma as CuPy's allocator (pure Python, no build step).

    import uma_cupy
    uma_cupy.install(quota_bytes=40 << 30)
    x = cupy.ones(1 << 20)          # uma-owned managed memory
    print(uma_cupy.stats())

install() makes a function that takes each block from uma_malloc on CuPy's current device and
stream, wraps it in cupy.cuda.UnownedMemory (the owner gives the block back through uma_free on
that stream when CuPy drops the memory) and returns a cupy.cuda.MemoryPointer. By default
(pool=True) CuPy's own cupy.cuda.MemoryPool sits in front of it, so an array costs CuPy's
Cython pool and not a Python call, and uma serves (and counts) the pool's segments; with
pool=False every array is a uma block of its own. The allocator is uma's process-wide default
allocator, shared with uma_torch in the same process. See docs/frameworks.md.
"""

import threading

import uma_c
from uma_c.adapter import allocator_functions
from uma_c import UmaError, UmaMemoryError

__version__ = uma_c.__version__  # one version for uma's packages (CHANGELOG.md)

__all__ = ["InstallError", "UmaError", "UmaMemoryError", "allocator", "dead", "done_with",
           "install", "is_installed", "memory_pool", "prefetch", "quota", "residency",
           "set_device_budget", "set_quota", "stats", "stats_json", "trim", "uninstall",
           "will_access"]

_lock = threading.Lock()
_state = {}  # "allocator", "options", "previous", "path" while installed


class InstallError(RuntimeError):
    """install() refused (CuPy missing, or installed already with other options)."""


class _Block:
    """Owner of one uma block inside a cupy.cuda.UnownedMemory: gives it back when CuPy drops
    the memory, on the stream it was allocated on."""

    __slots__ = ("allocator", "free", "ptr", "size", "device", "stream")

    def __init__(self, allocator, free, ptr, size, device, stream):
        self.allocator, self.free, self.ptr, self.size = allocator, free, ptr, size
        self.device, self.stream = device, stream

    def __del__(self):
        # A stopped allocator (process exit) has made the block inert already: nothing to give
        # back. Any other failure is reported by Python ("Exception ignored in ...").
        if not self.ptr or self.allocator.closed:
            return
        try:
            self.free(self.ptr, self.size, self.device, self.stream)
        except UmaError as error:
            if error.status_name != "UMA_ERR_ALLOCATOR_STOPPED":
                raise


def _import_cupy():
    try:
        import cupy
    except ImportError as error:
        raise InstallError(f"uma_cupy.install: CuPy is not importable ({error})") from error
    return cupy


def _make_malloc(cupy, allocator):
    get_device, get_stream = cupy.cuda.runtime.getDevice, cupy.cuda.get_current_stream
    memory_pointer, unowned = cupy.cuda.memory.MemoryPointer, cupy.cuda.memory.UnownedMemory
    malloc, free = allocator.unchecked_calls()  # CuPy hands valid ints: no checks per block

    def uma_cupy_malloc(size):
        device = get_device()
        stream = get_stream().ptr
        ptr = malloc(size, device, stream)
        owner = _Block(allocator, free, ptr, size, device, stream)
        return memory_pointer(unowned(ptr, size, owner, device), 0)

    return uma_cupy_malloc


def install(library=None, pool=True, **options):
    """Makes uma CuPy's allocator in this process (cupy.cuda.set_allocator). `pool`: CuPy's
    MemoryPool caches in front of uma (True, the default) or every array is a uma block
    (False). `options` as for uma_torch.install (uma_c.CONFIG_FIELDS). Memory CuPy allocated
    before stays with the allocator that made it. Returns the uma_c.Allocator; a second call
    with the same arguments returns it again. Raises InstallError, uma_c.LibraryNotFound,
    UmaError, TypeError or ValueError; nothing is changed then."""
    if not isinstance(pool, bool):
        raise TypeError(f"uma_cupy.install: pool must be True or False, not {pool!r}")
    options = uma_c.config_options(options)  # deprecated keywords under their new names
    with _lock:
        if _state:
            if options != _state["options"] or pool != (_state["pool"] is not None):
                raise InstallError("uma_cupy.install: uma is installed already with "
                                   f"{_state['options'] or 'default options'}")
            return _state["allocator"]
        cupy = _import_cupy()
        path, lib = uma_c.library(library)
        uma_c.make_config(lib, **options)  # validates every option before any state changes
        allocator = uma_c.Allocator.default(path, **options)
        previous = cupy.cuda.memory.get_allocator()
        malloc = _make_malloc(cupy, allocator)
        mempool = cupy.cuda.MemoryPool(malloc) if pool else None
        cupy.cuda.set_allocator(malloc if mempool is None else mempool.malloc)
        _state.update(allocator=allocator, options=options, previous=previous, path=path,
                      pool=mempool)
        return allocator


def uninstall():
    """Gives CuPy back the allocator it had before install(). Arrays already made from uma
    memory stay valid and are given back to uma when dropped."""
    with _lock:
        if not _state:
            raise InstallError("uma_cupy: install() has not been called in this process")
        import cupy
        cupy.cuda.set_allocator(_state["previous"])
        _state.clear()


def is_installed():
    """Whether uma is CuPy's allocator now."""
    return bool(_state)


def allocator():
    """The uma_c.Allocator install() set up; raises InstallError before install()."""
    if not _state:
        raise InstallError("uma_cupy: install() has not been called in this process")
    return _state["allocator"]


stats, stats_json, quota, set_quota, _trim_uma = allocator_functions(allocator)


def memory_pool():
    """The cupy.cuda.MemoryPool in front of uma (install's pool=True), or None."""
    allocator()
    return _state["pool"]


def trim():
    """Gives idle memory back: CuPy's pool frees its unused segments to uma (pool=True), then
    uma gives its idle cache to the allocator and the backend (uma_trim). Returns the bytes of
    uma's block-allocator slabs given back."""
    pool = memory_pool()
    if pool is not None:
        pool.free_all_blocks()
    return _trim_uma()


def prefetch(array, device=None, stream=None):
    """Migrates the array's memory (its whole allocation) to `device` (an index or
    uma_c.DEVICE_HOST; None: the array's device) on `stream` (None: CuPy's current)."""
    import cupy
    mem = array.data.mem
    if mem.size:
        target = array.device.id if device is None else device
        ptr = getattr(stream, "ptr", stream)
        allocator().prefetch(mem.ptr, mem.size, target,
                             cupy.cuda.get_current_stream().ptr if ptr is None else ptr)


def _array_ranges(arrays):
    """(address, bytes) of each array's own elements (a view: the part it spans), skipping
    empty ones; a single array may be given alone."""
    if hasattr(arrays, "data") and hasattr(arrays, "nbytes"):
        arrays = [arrays]
    ranges = [(a.data.ptr, a.nbytes) for a in arrays if a.nbytes]
    if not ranges:
        raise ValueError("uma_cupy: the plan names no array with memory")
    return ranges


def set_device_budget(device, budget_bytes):
    """uma keeps at most `budget_bytes` placed by plans on `device` (docs/residency.md)."""
    allocator().set_device_budget(device, budget_bytes)


def will_access(arrays, device=None, mode="read", policy="auto", stream=None,
                wait_complete=False, cycle_bytes=0, cycle_plans=0, tenant=None):
    """Plans the arrays (one or a list) for use on `device` (None: the first array's) with
    `mode` ("read"/"write") and `policy` ("auto", "migrate", "read_mostly", "remote_map",
    "discard"), the moves ordered on `stream` (None: CuPy's current stream) and held until
    done_with. Returns the moves queued (a dict). Over the budget: UmaMemoryError."""
    import cupy
    ranges = _array_ranges(arrays)
    if device is None:
        first = arrays if hasattr(arrays, "device") else list(arrays)[0]
        device = first.device.id
    ptr = getattr(stream, "ptr", stream)
    return allocator().will_access(
        ranges, device=device, mode=mode, policy=policy,
        stream=cupy.cuda.get_current_stream().ptr if ptr is None else ptr,
        wait_complete=wait_complete, cycle_bytes=cycle_bytes, cycle_plans=cycle_plans,
        tenant=tenant)


def done_with(arrays):
    """Ends one hold of each array's plan: evictable again."""
    allocator().done_with(_array_ranges(arrays))


def dead(arrays):
    """The arrays' contents are not needed (not held by a plan): dropped, nothing moves back.
    Returns the moves (a dict)."""
    return allocator().dead(_array_ranges(arrays))


def residency():
    """uma's residency report as a dict (uma_c.Allocator.residency)."""
    return allocator().residency()
