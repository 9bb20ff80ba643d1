#!/usr/bin/env python3
"""Every place that states uma's version says the project's (CHANGELOG.md's preamble names this
test): the first line of `uma info`, the build's umaConfigVersion.cmake, the Python packages'
__version__, and the newest released heading of CHANGELOG.md. Exit 0 when they agree; else each
disagreement on a line of its own, exit 1.

  versions_agree.py PROJECT_VERSION UMA_BINARY CONFIG_VERSION_FILE SOURCE_DIR
"""

import ast
import os
import re
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


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    project, uma, config, source = argv[1:]
    found = {}
    first = subprocess.run([uma, "info", "--backend", "host"], capture_output=True, text=True,
                           timeout=60).stdout.splitlines()
    match = re.match(r"uma (\S+),", first[0]) if first else None
    found["uma info"] = match.group(1) if match else f"(first line: {first[:1]})"
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
    if not wrong:
        print(f"versions agree: {project} ({', '.join(found)})")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
