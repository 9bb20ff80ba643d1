"""The Python packages of an unpacked install root (tests/deb_packages.cmake runs this with
PYTHONPATH at <root>/usr/lib/python3/dist-packages and neither UMA_LIBRARY nor LD_LIBRARY_PATH):
they import without PyTorch or CuPy, uma_c loads the root's libuma_c.so on its own and allocates
on the host backend, and install() without a framework refuses with its clear message.

    python3 tests/installed_python_check.py <root>
"""

import importlib.util
import os
import sys


def fail(message):
    print(f"installed_python_check: {message}", file=sys.stderr)
    sys.exit(1)


def check_refusal(module, framework, expected):
    """install() without the framework raises the adapter's InstallError, saying so."""
    if importlib.util.find_spec(framework) is not None:
        print(f"{framework} is importable here: {module.__name__}.install() not tried")
        return
    try:
        module.install()
    except module.InstallError as error:
        if expected not in str(error):
            fail(f"{module.__name__}.install() refused with {error!r}, expected {expected!r}")
        print(f"{module.__name__}.install() without {framework}: {error}")
        return
    fail(f"{module.__name__}.install() succeeded without {framework}")


def main():
    root = os.path.realpath(sys.argv[1])
    import uma_torch, uma_cupy, uma_c  # noqa: E401 - the import the packages promise

    for module in (uma_c, uma_torch, uma_cupy):
        if not os.path.realpath(module.__file__).startswith(root + os.sep):
            fail(f"{module.__name__} came from {module.__file__}, not from {root}")
    library = uma_c.find_library()
    if not os.path.realpath(library).startswith(root + os.sep):
        fail(f"uma_c found {library}, not the root's libuma_c.so")
    with uma_c.Allocator.create(backend="host") as allocator:
        pointer = allocator.malloc(65536)
        live = allocator.stats()["live_bytes"]
        allocator.free(pointer, 65536)
    if live < 65536:
        fail(f"an allocation of 65536 bytes left live_bytes at {live}")
    print(f"uma_c {uma_c.__version__}: {library}, host allocation of 64 KiB counted")
    check_refusal(uma_torch, "torch", "uma_torch.install: PyTorch is not importable")
    check_refusal(uma_cupy, "cupy", "uma_cupy.install: CuPy is not importable")


if __name__ == "__main__":
    main()
