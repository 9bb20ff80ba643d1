#!/usr/bin/env python3
"""Reference tables of the docs, checked against the code they describe.

A table follows a marker comment (invisible on GitHub); its first column names one item each
(backticks allowed):

  <!-- doc-table: struct NAME FILE -->   the members of `struct NAME` in FILE
  <!-- doc-table: c-functions FILE -->   the functions FILE declares with UMA_C_EXPORT

(The stats fields' table, docs/cli.md, is checked by tests/stats_fields_test.cpp against the
field table itself.) `doc_tables.py check ROOT` fails naming every missing or extra row, and
when a marker names a struct or file that is not there.
"""

import re
import sys
from pathlib import Path

MARKER = re.compile(r"^<!--\s*doc-table:\s*(struct\s+(\w+)|c-functions)\s+(\S+)\s*-->\s*$")
MEMBER = re.compile(r"^\s+(?:[\w:<>,\s*&]+?)\s+\**(\w+)\s*(?:=[^;]*|\{[^;]*\})?;")


def struct_members(text, name):
    """The data members of `struct name { ... };` (top level of its body), in order."""
    m = re.search(r"^struct\s+" + re.escape(name) + r"\s*\{", text, re.M)
    if not m:
        return None
    members, depth = [], 1
    for line in text[m.end():].split("\n"):
        code = line.split("//")[0]
        if depth == 1 and "(" not in code and not code.strip().startswith(("friend", "using",
                                                                            "static")):
            mm = MEMBER.match(code)
            if mm:
                members.append(mm.group(1))
        depth += code.count("{") - code.count("}")
        if depth <= 0:
            break
    return members


def c_functions(text):
    return re.findall(r"^UMA_C_EXPORT\s+[^(]*?\b(uma_\w+)\s*\(", text, re.M)


def table_rows(lines, start):
    """The first-column names of the markdown table after line `start`."""
    names, i = [], start + 1
    while i < len(lines) and lines[i].strip() == "":
        i += 1
    header = True
    while i < len(lines) and lines[i].startswith("|"):
        cell = lines[i].strip("|").split("|")[0].strip()
        if not header and not set(cell) <= set("-: "):
            names.append(cell.strip("`").split("(")[0].strip())
        header = False
        i += 1
    return [n for n in names if n]


def check(root):
    root = Path(root)
    problems, tables = [], 0
    for doc in [root / "README.md"] + sorted((root / "docs").glob("*.md")):
        lines = doc.read_text(encoding="utf-8").split("\n")
        for i, line in enumerate(lines):
            m = MARKER.match(line.strip())
            if not m:
                continue
            tables += 1
            where = f"{doc.relative_to(root)}:{i + 1}"
            source = root / m.group(3)
            if not source.is_file():
                problems.append(f"{where}: no file {m.group(3)}")
                continue
            text = source.read_text(encoding="utf-8")
            if m.group(2):
                want = struct_members(text, m.group(2))
                what = f"struct {m.group(2)} ({m.group(3)})"
                if want is None:
                    problems.append(f"{where}: {m.group(3)} has no struct {m.group(2)}")
                    continue
            else:
                want, what = c_functions(text), f"the functions of {m.group(3)}"
            have = table_rows(lines, i)
            for name in want:
                if name not in have:
                    problems.append(f"{where}: the table lacks `{name}` of {what}")
            for name in have:
                if name not in want:
                    problems.append(f"{where}: the table has `{name}`, which {what} lacks")
    for p in problems:
        print(p)
    print(f"{tables} reference table(s) checked; {len(problems)} problem(s)")
    return 1 if problems or tables == 0 else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "check":
        print(__doc__)
        sys.exit(2)
    sys.exit(check(sys.argv[2]))
