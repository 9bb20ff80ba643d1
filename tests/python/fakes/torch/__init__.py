"""A stand-in for PyTorch with only what uma_torch and the docs' examples touch (tests run where
torch is absent): torch.empty on a cuda device draws from the current pluggable allocator.
FAKE_TORCH_CUDA_INITIALIZED=1 makes torch.cuda.is_initialized() true."""

from . import cuda  # noqa: F401


class device:
    """torch.device stand-in: "cuda", "cuda:N" or "cpu"."""

    def __init__(self, spec):
        kind, _, index = str(spec).partition(":")
        self.type = kind
        self.index = int(index) if index else (0 if kind == "cuda" else None)


class _Storage:
    def __init__(self, ptr, nbytes):
        self._ptr, self._nbytes = ptr, nbytes

    def data_ptr(self):
        return self._ptr

    def nbytes(self):
        return self._nbytes


class Tensor:
    """A float32 tensor whose storage came from the current pluggable allocator (CUDA) ."""

    def __init__(self, count, dev):
        self.device = dev
        self.is_cuda = dev.type == "cuda"
        nbytes = 4 * count
        allocator = cuda.memory.current
        if not self.is_cuda or allocator is None:
            raise RuntimeError("the stand-in torch makes cuda tensors through a pluggable "
                               "allocator only")
        self._storage = _Storage(allocator.malloc(nbytes, dev.index, None), nbytes)
        self._allocator = allocator

    def untyped_storage(self):
        return self._storage

    def __del__(self):
        if self._storage.data_ptr():
            self._allocator.free(self._storage.data_ptr(), self._storage.nbytes(),
                                 self.device.index, None)


def empty(count, device="cpu"):
    """torch.empty(count, device=...) of float32, as the docs' examples call it."""
    return Tensor(count, globals()["device"](device))
