"""torch.cuda stand-in: is_initialized() and the memory submodule."""

import os

from . import memory  # noqa: F401


def is_initialized():
    return os.environ.get("FAKE_TORCH_CUDA_INITIALIZED") == "1"
