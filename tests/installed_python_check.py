"""uma's Python packages as installed (tests/deb_packages.cmake: from the .deb files, without
UMA_LIBRARY or LD_LIBRARY_PATH; tests/pip_install.cmake: by pip, with UMA_LIBRARY): they come from
PACKAGES_DIR and import without PyTorch or CuPy, uma_c loads LIBRARY (the path it must resolve
to) and allocates on the host backend, and install() without a framework refuses with its clear
message.

    PYTHONPATH=PACKAGES_DIR python3 tests/installed_python_check.py PACKAGES_DIR LIBRARY
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
    packages, expected_library = (os.path.realpath(arg) for arg in sys.argv[1:3])
    import uma_torch, uma_cupy, uma_c  # noqa: E401 - the import the packages promise

    for module in (uma_c, uma_torch, uma_cupy):
        if not os.path.realpath(module.__file__).startswith(packages + os.sep):
            fail(f"{module.__name__} came from {module.__file__}, not from {packages}")
    library = uma_c.find_library()
    if os.path.realpath(library) != expected_library:
        fail(f"uma_c found {library}, not {expected_library}")
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
