"""A stand-in for PyTorch with only what uma_torch and the docs' examples touch (tests run where
torch is absent): torch.empty on a cuda device draws from the current pluggable allocator (or,
before one is installed, from a stand-in of PyTorch's own: host buffers uma never saw).
torch.nn, torch.optim and torch.autograd hold the little offload() needs: modules with hooks,
an optimizer, and a backward pass replayed from the forward's module calls.
FAKE_TORCH_CUDA_INITIALIZED=1 makes torch.cuda.is_initialized() true."""

import ctypes

from . import cuda  # noqa: F401

_native = {}  # address -> buffer: PyTorch's own allocator stand-in


class device:
    """torch.device stand-in: "cuda", "cuda:N" or "cpu"."""

    def __init__(self, spec):
        kind, _, index = str(spec).partition(":")
        self.type = kind
        self.index = int(index) if index else (0 if kind == "cuda" else None)

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class _Storage:
    def __init__(self, ptr, nbytes):
        self._ptr, self._nbytes = ptr, nbytes

    def data_ptr(self):
        return self._ptr

    def nbytes(self):
        return self._nbytes


uint8, float32 = "uint8", "float32"  # dtypes: their names
_ITEM_BYTES = {uint8: 1, float32: 4}


class Tensor:
    """A one-dimensional tensor (float32 unless asked) whose storage came from the current
    pluggable allocator (CUDA), or from the native stand-in before one is installed, or from
    host memory ("cpu"). Slicing and view() give views of it (_View)."""

    requires_grad = False

    def __init__(self, count, dev, dtype=float32):
        self.device = dev
        self.is_cuda = dev.type == "cuda"
        self._count, self.dtype = count, dtype
        nbytes = _ITEM_BYTES[dtype] * count
        allocator = cuda.memory.current if self.is_cuda else None
        if allocator is None:
            buffer = ctypes.create_string_buffer(max(nbytes, 1))
            ptr = ctypes.addressof(buffer)
            _native[ptr] = buffer
        else:
            ptr = allocator.malloc(nbytes, dev.index, None)
        self._storage = _Storage(ptr, nbytes)
        self._allocator = allocator

    def untyped_storage(self):
        return self._storage

    def data_ptr(self):
        return self._storage.data_ptr()

    def numel(self):
        return self._count

    def element_size(self):
        return _ITEM_BYTES[self.dtype]

    @property
    def shape(self):
        return (self._count,)

    def __getitem__(self, index):
        """A slice [start:stop] of elements: a view."""
        start, stop, _ = index.indices(self._count)
        return _View(self, (start - 0) * self.element_size(), max(stop - start, 0), self.dtype)

    def split(self, size):
        """Views of at most `size` elements each, in order (torch.Tensor.split on dim 0)."""
        return tuple(self[start:start + size] for start in range(0, self._count, size)) or (
            self[0:0],)

    def view(self, what):
        """view(dtype): the same bytes as that dtype; view(shape) or view(-1): the same tensor
        (a one-dimensional shape of the same count)."""
        if what in _ITEM_BYTES:
            nbytes = self._count * self.element_size()
            return _View(self, 0, nbytes // _ITEM_BYTES[what], what)
        shape = (what,) if isinstance(what, int) else tuple(what)
        if shape not in (self.shape, (-1,)):
            raise RuntimeError(f"view{shape} of a tensor of shape {self.shape}")
        return self

    def is_contiguous(self):
        """True unless a test made the tensor strided (`_contiguous = False`, as a
        channels_last parameter; zeros_like keeps it, as preserve_format does)."""
        return getattr(self, "_contiguous", True)

    def copy_(self, other, non_blocking=False):
        """Logs ("copy", destination, source) with the current stream."""
        cuda.log.append(("copy", self.data_ptr(), other.data_ptr(),
                         cuda.current_stream().cuda_stream))
        return self

    def __del__(self):
        ptr = self._storage.data_ptr()
        if self._allocator is not None and ptr:
            self._allocator.free(ptr, self._storage.nbytes(), self.device.index, None)
        else:
            _native.pop(ptr, None)


class _View(Tensor):
    """Elements of another tensor from a byte offset on: no storage of its own (the base
    stays alive while the view does)."""

    def __init__(self, base, offset, count, dtype):
        self._base, self.device, self.is_cuda = base, base.device, base.is_cuda
        self._count, self.dtype = count, dtype
        self._storage = _Storage(base.data_ptr() + offset, count * _ITEM_BYTES[dtype])
        self._allocator = None

    def __del__(self):
        pass


def empty(count, dtype=float32, device="cpu"):
    """torch.empty(count, dtype=..., device=...), as the docs' examples and uma_torch call it."""
    return Tensor(count, globals()["device"](device), dtype)


def zeros_like(tensor):
    out = Tensor(tensor.numel(), tensor.device)
    if not tensor.is_contiguous():
        out._contiguous = False
    return out


def empty_like(tensor):
    return Tensor(tensor.numel(), tensor.device)


def _foreach_copy_(destinations, sources):
    """Logs ("foreach_copy", [elements of each destination]): one launch; then each pair as
    copy_ does."""
    cuda.log.append(("foreach_copy", [t.numel() for t in destinations]))
    for destination, source in zip(destinations, sources):
        destination.copy_(source)


def is_tensor(obj):
    return isinstance(obj, Tensor)


def _fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, **kwargs):
    """Logs ("fused_adamw", [elements of each parameter tensor], current stream): one launch."""
    cuda.log.append(("fused_adamw", [t.numel() for t in params],
                     cuda.current_stream().cuda_stream))


from . import autograd, nn, optim  # noqa: E402,F401 (they use Tensor)
