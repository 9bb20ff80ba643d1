"""A stand-in for PyTorch with only what uma_torch touches (tests run where torch is absent).
FAKE_TORCH_CUDA_INITIALIZED=1 makes torch.cuda.is_initialized() true."""

from . import cuda  # noqa: F401
