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


class Tensor:
    """A float32 tensor whose storage came from the current pluggable allocator (CUDA), or
    from the native stand-in before one is installed, or from host memory ("cpu")."""

    requires_grad = False

    def __init__(self, count, dev):
        self.device = dev
        self.is_cuda = dev.type == "cuda"
        self._count = count
        nbytes = 4 * count
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
        return 4

    def is_contiguous(self):
        return True

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


def empty(count, device="cpu"):
    """torch.empty(count, device=...) of float32, as the docs' examples call it."""
    return Tensor(count, globals()["device"](device))


def zeros_like(tensor):
    return Tensor(tensor.numel(), tensor.device)


def empty_like(tensor):
    return Tensor(tensor.numel(), tensor.device)


def is_tensor(obj):
    return isinstance(obj, Tensor)


from . import autograd, nn, optim  # noqa: E402,F401 (they use Tensor)
