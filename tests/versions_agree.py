#!/usr/bin/env python3
"""Every place that states uma's version says the project's (CHANGELOG.md's preamble names this
test): the first line of `uma info`, `uma --version`, the build's umaConfigVersion.cmake, the
Python packages' __version__, the newest released heading of CHANGELOG.md and the file name of
libuma_c.so.VERSION. And the C ABI's version is said alike where it is said: UMA_C_ABI_VERSION in
uma.h, libuma_c.so's SONAME (libuma_c.so.N) and uma_c.ABI_VERSION (the SONAME the Python packages
load). Exit 0 when they agree; else each disagreement on a line of its own, exit 1.

  versions_agree.py PROJECT_VERSION UMA_BINARY CONFIG_VERSION_FILE SOURCE_DIR LIBUMA_C
"""

import ast
import os
import re
import shutil
import subprocess
import sys


def package_version(source, package):
    """The package's __version__: a string literal, or uma_c's (the packages share one)."""
    path = os.path.join(source, "python", package, "__init__.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                getattr(t, "id", None) == "__version__" for t in node.targets):
            if isinstance(node.value, ast.Constant):
                return node.value.value
            if ast.unparse(node.value) == "uma_c.__version__":
                return package_version(source, "uma_c")
            return f"(not a literal: {ast.unparse(node.value)})"
    return "(none)"


def binding_abi_version(source):
    """uma_c.ABI_VERSION: an int literal in python/uma_c/binding.py."""
    path = os.path.join(source, "python", "uma_c", "binding.py")
    with open(path, encoding="utf-8") as f:
        match = re.search(r"^ABI_VERSION = (\d+)$", f.read(), re.MULTILINE)
    return match.group(1) if match else "(no ABI_VERSION = N line)"


def soname(library):
    """The DT_SONAME of the shared library at `library`, as readelf shows it."""
    readelf = shutil.which("readelf")
    if readelf is None:
        return "(readelf not found)"
    dynamic = subprocess.run([readelf, "-d", library], capture_output=True, text=True,
                             timeout=60).stdout
    match = re.search(r"\(SONAME\)\s+Library soname: \[([^]]+)\]", dynamic)
    return match.group(1) if match else "(no SONAME)"


def abi_disagreements(source, library):
    """The C ABI's version as uma.h, libuma_c.so's SONAME and uma_c say it."""
    with open(os.path.join(source, "actors", "c", "uma.h"), encoding="utf-8") as f:
        match = re.search(r"^#define UMA_C_ABI_VERSION (\d+)$", f.read(), re.MULTILINE)
    abi = match.group(1) if match else "(none)"
    found = {"libuma_c.so's SONAME": soname(library),
             "uma_c.ABI_VERSION": binding_abi_version(source)}
    wanted = {"libuma_c.so's SONAME": f"libuma_c.so.{abi}", "uma_c.ABI_VERSION": abi}
    wrong = [f"{where} says {found[where]}; uma.h's UMA_C_ABI_VERSION {abi} makes it "
             f"{wanted[where]}" for where in found if found[where] != wanted[where]]
    return abi, wrong


def first_line(command):
    lines = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout
    return lines.splitlines()[0] if lines else ""


def main(argv):
    if len(argv) != 6:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    project, uma, config, source, library = argv[1:]
    found = {}
    line = first_line([uma, "info", "--backend", "host"])
    match = re.match(r"uma (\S+),", line)
    found["uma info"] = match.group(1) if match else f"(first line: {line!r})"
    line = first_line([uma, "--version"])
    match = re.fullmatch(r"uma (\S+)", line)
    found["uma --version"] = match.group(1) if match else f"(first line: {line!r})"
    match = re.fullmatch(r"libuma_c\.so\.(\S+)", os.path.basename(library))
    found["libuma_c.so's file name"] = match.group(1) if match else os.path.basename(library)
    with open(config, encoding="utf-8") as f:
        match = re.search(r'set\(PACKAGE_VERSION "([^"]+)"\)', f.read())
    found["umaConfigVersion.cmake"] = match.group(1) if match else "(no PACKAGE_VERSION)"
    for package in ("uma_c", "uma_torch", "uma_cupy"):
        found[f"{package}.__version__"] = package_version(source, package)
    with open(os.path.join(source, "CHANGELOG.md"), encoding="utf-8") as f:
        released = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", f.read(), re.MULTILINE)
    found["CHANGELOG.md's newest release"] = released[0] if released else "(none)"
    wrong = {where: value for where, value in found.items() if value != project}
    for where, value in wrong.items():
        print(f"{where} says {value}; the project (CMakeLists.txt) is {project}")
    abi, wrong_abi = abi_disagreements(source, library)
    for line in wrong_abi:
        print(line)
    if not wrong and not wrong_abi:
        print(f"versions agree: {project} ({', '.join(found)}); C ABI {abi} (uma.h, "
              "libuma_c.so's SONAME, uma_c.ABI_VERSION)")
    return 1 if wrong or wrong_abi else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
