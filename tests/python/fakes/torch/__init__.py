"""A stand-in for PyTorch with only what uma_torch and the docs' examples touch (tests run where
torch is absent): torch.empty on a cuda device draws from the current pluggable allocator (or,
before one is installed, from a stand-in of PyTorch's own: host buffers uma never saw).
torch.nn, torch.optim and torch.autograd hold the little offload() needs: modules with hooks,
an optimizer, and a backward pass replayed from the forward's module calls. Storage is freed
when the last tensor using it goes (as PyTorch's is), so `param.data = other` lets the old
memory go; torch.as_tensor wraps memory given by __cuda_array_interface__ without owning it.
FAKE_TORCH_CUDA_INITIALIZED=1 makes torch.cuda.is_initialized() true."""

import ctypes
import math

from . import cuda  # noqa: F401


class _C:
    """torch._C stand-in: what CUDA graph trees ask of the allocator."""

    @staticmethod
    def _cuda_checkPoolLiveAllocations(device, pool, allocations):
        if cuda.memory.current is not None:  # as PyTorch's pluggable allocator answers
            raise RuntimeError("pluggable does not yet support checkPoolLiveAllocations. If you "
                               "need it, please file an issue describing your use case.")
        return True


class device:
    """torch.device stand-in: "cuda", "cuda:N", "cpu", another device, or ("cuda", N)."""

    def __init__(self, spec, index=None):
        kind, _, text = str(spec).partition(":")
        self.type = kind
        if index is not None:
            self.index = index
        else:
            self.index = int(text) if text else (0 if kind == "cuda" else None)

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class _Storage:
    """Bytes at ptr. `release` (called once, when the storage goes) gives owned memory back;
    `keep` is what must outlive it (the storage a view's bytes belong to, a native buffer)."""

    def __init__(self, ptr, nbytes, release=None, keep=None):
        self._ptr, self._nbytes, self._release, self._keep = ptr, nbytes, release, keep

    def data_ptr(self):
        return self._ptr

    def nbytes(self):
        return self._nbytes

    def __del__(self):
        release, self._release = self._release, None
        if release is not None:
            release()


uint8, float32, float16, bfloat16 = "uint8", "float32", "float16", "bfloat16"  # dtypes: names
_ITEM_BYTES = {uint8: 1, float32: 4, float16: 2, bfloat16: 2}


def _shape_of(size):
    """A shape from torch.empty's size arguments: (n,), ((a, b),) or (a, b)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(int(n) for n in size)


class Tensor:
    """A tensor (float32 unless asked; one-dimensional unless a shape is given) whose storage
    came from the current pluggable allocator (CUDA), or from the native stand-in before one is
    installed, or from host memory ("cpu"). Slicing and view() give views of it (_View)."""

    requires_grad = False

    def __init__(self, count, dev, dtype=float32, shape=None):
        self.device = dev
        self.is_cuda = dev.type == "cuda"
        self._count, self.dtype, self._shape = count, dtype, shape
        nbytes = _ITEM_BYTES[dtype] * count
        allocator = cuda.memory.current if self.is_cuda else None
        if allocator is None:
            buffer = ctypes.create_string_buffer(max(nbytes, 1))
            self._storage = _Storage(ctypes.addressof(buffer), nbytes, keep=buffer)
        else:
            ptr = allocator.malloc(nbytes, dev.index, None)
            self._storage = _Storage(ptr, nbytes, release=lambda: allocator.free(
                ptr, nbytes, dev.index, None) if ptr else None)

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
        return self._shape if self._shape is not None else (self._count,)

    @property
    def data(self):
        """A tensor sharing this one's storage (PyTorch: detached)."""
        return _View(self, 0, self._count, self.dtype, self._shape)

    @data.setter
    def data(self, other):
        """Takes other's storage, shape and dtype (PyTorch's set_data); the storage held until
        now goes when nothing else uses it."""
        self._storage, self._count, self.dtype = other._storage, other._count, other.dtype
        self._shape, self.device, self.is_cuda = other._shape, other.device, other.is_cuda

    def __getitem__(self, index):
        """A slice [start:stop] of elements: a view."""
        start, stop, _ = index.indices(self._count)
        return _View(self, (start - 0) * self.element_size(), max(stop - start, 0), self.dtype)

    def split(self, size):
        """Views of at most `size` elements each, in order (torch.Tensor.split on dim 0)."""
        return tuple(self[start:start + size] for start in range(0, self._count, size)) or (
            self[0:0],)

    def view(self, *what):
        """view(dtype): the same bytes as that dtype (one-dimensional); view(shape),
        view(*shape) or view(-1): the same elements in that shape."""
        if len(what) == 1 and what[0] in _ITEM_BYTES:
            nbytes = self._count * self.element_size()
            if nbytes % _ITEM_BYTES[what[0]]:
                raise RuntimeError(f"view({what[0]}) of {nbytes} bytes")
            return _View(self, 0, nbytes // _ITEM_BYTES[what[0]], what[0])
        shape = _shape_of(what)
        if shape == (-1,):
            shape = (self._count,)
        if math.prod(shape) != self._count:
            raise RuntimeError(f"view{shape} of a tensor of shape {self.shape}")
        return _View(self, 0, self._count, self.dtype, shape)

    def is_contiguous(self):
        """True unless a test made the tensor strided (`_contiguous = False`, as a
        channels_last parameter; zeros_like keeps it, as preserve_format does)."""
        return getattr(self, "_contiguous", True)

    def copy_(self, other, non_blocking=False):
        """Logs ("copy", destination, source) with the current stream."""
        cuda.log.append(("copy", self.data_ptr(), other.data_ptr(),
                         cuda.current_stream().cuda_stream))
        return self


class _View(Tensor):
    """Elements of another tensor from a byte offset on: no memory of its own (the storage
    they belong to stays alive while the view does)."""

    def __init__(self, base, offset, count, dtype, shape=None):
        self.device, self.is_cuda = base.device, base.is_cuda
        self._count, self.dtype, self._shape = count, dtype, shape
        self._storage = _Storage(base.data_ptr() + offset, count * _ITEM_BYTES[dtype],
                                 keep=base._storage)


def empty(*size, dtype=float32, device="cpu"):
    """torch.empty(n, ...), torch.empty((a, b), ...) or torch.empty(a, b, ...) with dtype= and
    device=, as the docs' examples and uma_torch call it."""
    shape = _shape_of(size)
    return Tensor(math.prod(shape), globals()["device"](device), dtype,
                  shape if len(shape) != 1 else None)


def as_tensor(obj, dtype=None, device=None):
    """A uint8 tensor over the bytes of `obj.__cuda_array_interface__` (typestr "|u1", one
    dimension), owning nothing: `obj` stays alive with it, as PyTorch keeps it."""
    interface = obj.__cuda_array_interface__
    if interface["typestr"] != "|u1" or len(interface["shape"]) != 1 or dtype is not None:
        raise TypeError(f"the stand-in as_tensor takes one-dimensional bytes, not {interface}")
    (count,), (ptr, _) = interface["shape"], interface["data"]
    out = Tensor.__new__(Tensor)
    out.device = globals()["device"](device if device is not None else "cuda")
    out.is_cuda, out._count, out.dtype, out._shape = True, count, uint8, None
    out._storage = _Storage(ptr, count, keep=obj)
    cuda.log.append(("as_tensor", ptr, count))
    return out


def frombuffer(buffer, dtype=uint8):
    """A one-dimensional CPU tensor over the bytes of `buffer` (writable: a ctypes array, a
    memoryview of one), owning nothing: `buffer` stays alive with it, as PyTorch keeps it."""
    view = memoryview(buffer).cast("B")
    ptr = ctypes.addressof(ctypes.c_char.from_buffer(view)) if view.nbytes else 0
    out = Tensor.__new__(Tensor)
    out.device, out.is_cuda = device("cpu"), False
    out._count, out.dtype, out._shape = view.nbytes // _ITEM_BYTES[dtype], dtype, None
    out._storage = _Storage(ptr, view.nbytes, keep=buffer)
    return out


_grad_enabled = [True]


def is_grad_enabled():
    return _grad_enabled[-1]


class no_grad:  # noqa: N801 (torch.no_grad's name)
    """with torch.no_grad(): is_grad_enabled() is False inside."""

    def __enter__(self):
        _grad_enabled.append(False)

    def __exit__(self, *exc):
        _grad_enabled.pop()


inference_mode = no_grad


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
