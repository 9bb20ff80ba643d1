"""uma_torch.pool(): a torch.cuda.MemPool whose segments are uma's managed memory, usable with
torch.cuda.use_mem_pool at any point of a program, beside PyTorch's own allocator (no global
install). PyTorch's caching allocator carves the pool's tensors out of segments it takes from
uma, so its own tools see them: torch.cuda.memory_stats(), memory_snapshot(), MemPool.snapshot(),
_memory_viz, CUDA graphs. See docs/frameworks.md "Pools"."""

import contextlib
import threading

import uma_c
from uma_c import binding

_lock = threading.Lock()
_pools = []  # every Pool made in this process
_allocators = []  # every allocator bound to a pool slot (never closed: PyTorch may call it)


class PoolError(RuntimeError):
    """pool() refused: PyTorch has no MemPool, this libuma_c has no pool functions, or every
    pool slot is taken. Nothing was changed."""


def _mem_pool_class(torch):
    cls = getattr(getattr(torch, "cuda", None), "MemPool", None)
    if cls is None or not hasattr(torch._C, "_cuda_customAllocator"):
        raise PoolError("uma_torch.pool: this PyTorch has no torch.cuda.MemPool with custom "
                        "allocators (PyTorch >= 2.6 needed); use uma_torch.install() instead")
    return cls


class Pool:
    """A uma-backed torch.cuda.MemPool (`mem_pool`) and the uma allocator behind it
    (`allocator`, a uma_c.Allocator). Tensors made under `with pool:` (this thread) or
    `with pool.use(all_threads=True):` live in uma's managed memory; everything else stays with
    PyTorch's allocator."""

    def __init__(self, torch, allocator, mem_pool, device, label):
        self.torch, self.allocator, self.mem_pool = torch, allocator, mem_pool
        self.device, self.label = device, label

    @property
    def id(self):
        """The MemPool's id (what torch.cuda.graph(pool=...) and snapshots name)."""
        return self.mem_pool.id

    def _open(self):
        if self.mem_pool is None:
            raise PoolError(f"uma_torch.Pool {self.label!r} is closed")
        return self.mem_pool

    def use(self, all_threads=False):
        """A context routing new CUDA allocations on `device` to this pool: of this thread
        (torch.cuda.use_mem_pool), or with all_threads=True of every thread, the autograd
        engine's too (a backward pass allocates its gradients there)."""
        if not all_threads:
            return self.torch.cuda.use_mem_pool(self._open(), device=self.device)
        return self._all_threads()

    @contextlib.contextmanager
    def _all_threads(self):
        begin = getattr(self.torch._C, "_cuda_beginAllocateToPool", None)
        if begin is None:
            raise PoolError("uma_torch.Pool.use(all_threads=True): this PyTorch has no "
                            "torch._C._cuda_beginAllocateToPool; use the pool per thread")
        begin(self.device, self._open().id)
        try:
            yield self
        finally:
            self.torch._C._cuda_endAllocateToPool(self.device, self.mem_pool.id)
            self.torch._C._cuda_releasePool(self.device, self.mem_pool.id)

    def __enter__(self):
        self._context = self.use()
        self._context.__enter__()
        return self

    def __exit__(self, *exc):
        context, self._context = self._context, None
        return context.__exit__(*exc)

    def snapshot(self):
        """PyTorch's snapshot of this pool's segments (MemPool.snapshot()); [] once closed."""
        return self.mem_pool.snapshot() if self.mem_pool is not None else []

    def owns(self, tensor):
        """Whether `tensor`'s storage lies in one of this pool's segments."""
        start = tensor.untyped_storage().data_ptr()
        for segment in self.snapshot():
            if segment["address"] <= start < segment["address"] + segment["total_size"]:
                return True
        return False

    def empty_cache(self):
        """PyTorch's empty_cache (its own pools' free segments back to CUDA), then uma's idle
        slabs back to CUDA (uma_trim); returns the slab bytes uma gave back. PyTorch keeps a
        live pool's free segments cached in the pool (they serve its next tensors): close()
        gives them back."""
        self.torch.cuda.empty_cache()
        return self.allocator.trim()

    def close(self):
        """Ends the pool: PyTorch drops it, its free segments go back to uma at the next
        torch.cuda.empty_cache() (segments holding live tensors when they are freed), and uma
        gives its idle slabs back; returns the slab bytes given back. Allocations can no longer
        be routed to it. The uma allocator stays (PyTorch may still free into it)."""
        with _lock:
            if self in _pools:
                _pools.remove(self)
        self.mem_pool = None
        import gc
        gc.collect()
        self.torch.cuda.synchronize(self.device)
        self.torch.cuda.empty_cache()
        return self.allocator.trim()

    def stats(self):
        """uma's counters of the pool's allocator (uma_stats)."""
        return self.allocator.stats()

    def residency(self):
        """uma's residency report of the pool's allocator."""
        return self.allocator.residency()

    def set_budget(self, budget_bytes):
        """The device bytes of this pool's memory uma keeps resident; more stays on the host."""
        self.allocator.set_device_budget(self.device, budget_bytes)


def pool(device=None, budget_bytes=None, quota_bytes=None, label="uma", library=None,
         use_on_oom=False, **options):
    """A uma_torch.Pool on `device` (None: the current one): a torch.cuda.MemPool whose segments
    a uma allocator of its own serves (managed memory; `budget_bytes`: the device bytes it keeps
    resident, the rest lives on the host; `quota_bytes`: the most it holds). `options` are
    further uma_c.CONFIG_FIELDS. `use_on_oom`: PyTorch may reuse the pool's free cached blocks
    when an allocation outside it runs out of memory (MemPool's flag). The pool and its allocator
    live as long as the process (at most 16 pools). Raises PoolError, TypeError, ValueError or
    UmaError; nothing is changed then."""
    import torch
    options = uma_c.config_options(options)  # deprecated keywords under their new names
    mem_pool_class = _mem_pool_class(torch)
    if not isinstance(label, str) or not label:
        raise TypeError("uma_torch.pool: label must be a non-empty str")
    path, lib = uma_c.library(library)
    if not binding.has_torch_tools(lib):
        raise PoolError(f"uma_torch.pool: {path} has no uma_torch_pool_functions (a libuma_c "
                        "older than the pools); rebuild uma")
    index = torch.cuda.current_device() if device is None else torch.device("cuda", device).index
    if index is None:
        index = torch.cuda.current_device()
    uma_c.make_config(lib, quota_bytes=quota_bytes, **options)  # validates before anything
    with _lock:
        allocator = uma_c.Allocator.create(path, quota_bytes=quota_bytes, **options)
        try:
            if budget_bytes is not None:
                allocator.set_device_budget(index, budget_bytes)
            malloc_fn, free_fn = allocator.torch_pool_functions()
        except BaseException:
            allocator.close()
            raise
        # From here the allocator is bound to a slot: it lives as long as the process.
        _allocators.append(allocator)
        custom = torch._C._cuda_customAllocator(malloc_fn, free_fn)
        with torch.cuda.device(index):
            mem_pool = mem_pool_class(custom, use_on_oom=use_on_oom)
        made = Pool(torch, allocator, mem_pool, index, label)
        _pools.append(made)
        return made


def pools():
    """Every uma_torch.Pool made in this process."""
    with _lock:
        return list(_pools)


def pool_of(tensor):
    """The uma_torch.Pool whose segments hold `tensor`, or None."""
    for made in pools():
        if made.device == tensor.device.index and made.owns(tensor):
            return made
    return None
