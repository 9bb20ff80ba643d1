#!/usr/bin/env python3
"""uma's size rules (docs/design.md, "Rules the build checks").

  * No library file (sys/ memory/ messages/ actors/) over 500 lines.
  * No function over 60 lines, counted from the line of its opening brace to the line of its
    closing brace, in the library and in tools/ examples/ python/ (tests and benches are exempt).

C++ is scanned by a pragmatic brace matcher: comments, string, raw-string and character literals
are blanked first; a brace at namespace or class scope opens a namespace, a class, an
initializer or a function body; everything inside a function body (lambdas, CAF behaviour lists,
local classes) counts toward that function. Python functions are measured with the ast module.

There is no list of exceptions: a violation fails the check. Exit status: 0 clean, 1 violations,
2 usage error.

  tools/check_sizes.py [--root DIR]
  tools/check_sizes.py --self-test
"""

import argparse
import ast
import os
import re
import sys
import unittest

LIBRARY_DIRS = ("sys", "memory", "messages", "actors")
PROGRAM_DIRS = ("tools", "examples", "python")
FILE_LIMIT = 500
FUNCTION_LIMIT = 60
CPP_SUFFIXES = (".cpp", ".hpp", ".h", ".cc", ".cu", ".cuh")

# --- C++: blank comments and literals ---------------------------------------------------------

RAW_STRING = re.compile(r'(?:u8|u|U|L)?R"([^ ()\\\t\n]{0,16})\(')


def _blank(text):
    """`text` with every non-newline character replaced by a space (line numbers survive)."""
    return re.sub(r"[^\n]", " ", text)


def _is_digit_separator(src, i):
    """True when the quote at `i` separates digits (1'000'000) rather than opening a char."""
    j = i
    while j > 0 and (src[j - 1].isalnum() or src[j - 1] in "_.'"):
        j -= 1
    return j < i and src[j].isdigit()


def _skip_quoted(src, i, quote):
    """Index just past the literal opened by `quote` at `i` (escapes honoured)."""
    j = i + 1
    while j < len(src) and src[j] != quote and src[j] != "\n":
        j += 2 if src[j] == "\\" else 1
    return min(j + 1, len(src))


def _skip_preprocessor(src, i):
    """Index of the newline ending the directive at `i` (continuations followed)."""
    while True:
        end = src.find("\n", i)
        if end < 0:
            return len(src)
        if src[end - 1] != "\\":
            return end
        i = end + 1


def strip_cpp(src):
    """`src` with comments, literals and preprocessor lines blanked; newlines are kept."""
    out = []
    i = 0
    line_start = True
    while i < len(src):
        c = src[i]
        if line_start and c == "#":
            end = _skip_preprocessor(src, i)
            out.append(_blank(src[i:end]))
            i = end
            continue
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        end = _literal_or_comment_end(src, i)
        if end is None:
            out.append(c)
            i += 1
            continue
        keep = src[i] if src[i] in "\"'" else " "
        out.append(keep + _blank(src[i + 1:end - 1]) + (keep if end - i > 1 else ""))
        i = end
    return "".join(out)


def _literal_or_comment_end(src, i):
    """End index of the comment or literal starting at `i`, or None when none starts there."""
    if src.startswith("//", i):
        end = src.find("\n", i)
        return len(src) if end < 0 else end
    if src.startswith("/*", i):
        end = src.find("*/", i + 2)
        return len(src) if end < 0 else end + 2
    raw = RAW_STRING.match(src, i)
    if raw and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
        end = src.find(")" + raw.group(1) + '"', raw.end())
        return len(src) if end < 0 else end + len(raw.group(1)) + 2
    if src[i] == '"':
        return _skip_quoted(src, i, '"')
    if src[i] == "'" and not _is_digit_separator(src, i):
        return _skip_quoted(src, i, "'")
    return None


# --- C++: classify braces ---------------------------------------------------------------------

KEYWORDS_BEFORE_PAREN = {"if", "for", "while", "switch", "catch", "return", "sizeof", "alignof",
                         "decltype", "alignas", "noexcept", "requires", "static_assert",
                         "throw", "new", "delete", "co_return", "co_await", "typeid"}
QUALIFIER_TAIL = re.compile(r"(?:\b(?:const|volatile|noexcept|override|final|mutable|try)\b|&&?|\s)*$")


def _drop_template_heads(header):
    """`header` without leading `template <...>` clauses and `[[attributes]]`."""
    while True:
        header = header.lstrip()
        if header.startswith("[["):
            end = header.find("]]")
            header = header[end + 2:] if end >= 0 else ""
            continue
        m = re.match(r"template\s*<", header)
        if not m:
            return header
        depth, j = 1, m.end()
        while j < len(header) and depth:
            depth += {"<": 1, ">": -1}.get(header[j], 0)
            j += 1
        header = header[j:]


def _top_level(header):
    """`header` with the contents of (), [] and {} groups blanked (their brackets kept)."""
    out, depth = [], 0
    for c in header:
        if c in "([{":
            out.append(c if depth == 0 else " ")
            depth += 1
        elif c in ")]}":
            depth = max(depth - 1, 0)
            out.append(c if depth == 0 else " ")
        else:
            out.append(c if depth == 0 else " ")
    return "".join(out)


def _has_assignment(flat):
    flat = re.sub(r"\boperator\s*[^\s(]*", "operator", flat)
    return re.search(r"(?<![=!<>])=(?!=)", flat) is not None


def classify(header):
    """'namespace', 'class', 'function' or 'other' for a brace opened after `header`."""
    header = " ".join(_drop_template_heads(header).split())
    flat = _top_level(header)
    if re.search(r"\bnamespace\b", flat) or re.match(r"extern\s*(\"\")?\s*$", header):
        return "namespace"
    if re.match(r"(?:\w+\s+)*?(class|struct|union|enum)\b", flat) and "(" not in flat:
        return "class"
    if _has_assignment(flat):
        is_lambda = re.search(r"\]\s*(\(|$|mutable|constexpr|noexcept|->)", flat)
        return "function" if is_lambda else "other"
    if "(" not in flat:
        return "other"
    if re.search(r"\)[^()]*->", flat) or re.search(r"\brequires\b", flat):
        return "function"
    closing = flat.rfind(")")
    if QUALIFIER_TAIL.fullmatch(flat[closing + 1:]):
        return "function"
    # a constructor whose init list ends with a braced member initializer: `: a_(x), b_{y}`
    if flat.endswith("}") and re.search(r"\)\s*(?:noexcept\s*)?:", flat):
        return "function"
    return "other"


def function_name(header):
    """A readable name for the function `header` declares (the identifier before its `(`)."""
    flat = _top_level(" ".join(_drop_template_heads(header).split()))
    if _has_assignment(flat):
        m = re.search(r"([\w:~]+)\s*=", flat)
        return (m.group(1) if m else "lambda") + " (lambda)"
    for m in re.finditer(r"((?:[\w~]+\s*::\s*)*(?:operator\s*[^\s(]*|[\w~]+))\s*\(", flat):
        if m.group(1).split("::")[-1].strip() not in KEYWORDS_BEFORE_PAREN:
            return re.sub(r"\s+", "", m.group(1))
    return "function"


def cpp_functions(src):
    """(name, first line, last line) of every function body in C++ source `src` (1-based)."""
    text = strip_cpp(src)
    found = []
    stack = []  # (kind, line, header) per open brace
    header = []
    line = 1
    for c in text:
        if c == "\n":
            line += 1
        in_function = any(kind == "function" for kind, _, _ in stack)
        if c == "{":
            if in_function:
                stack.append(("block", line, ""))
                continue
            head = "".join(header)
            kind = classify(head)
            stack.append((kind, line, head))
            if kind == "other":
                header.append("{")
            else:
                header = []
        elif c == "}":
            if not stack:
                continue
            kind, first, head = stack.pop()
            if kind == "function":
                found.append((function_name(head), first, line))
            if in_function and kind == "block":
                continue
            if kind == "other":
                header.append("}")
            else:
                header = []
        elif c == ";" and not in_function:
            header = []
        elif not in_function:
            header.append(c)
    return found


def python_functions(src):
    """(name, first line, last line) of every function in Python source `src`."""
    tree = ast.parse(src)
    return [(node.name, node.lineno, node.end_lineno) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


# --- the check ----------------------------------------------------------------------------------

def source_files(root):
    """(relative path, is library) of every file the rules apply to, sorted."""
    out = []
    for top in LIBRARY_DIRS + PROGRAM_DIRS:
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith(CPP_SUFFIXES) or name.endswith(".py"):
                    rel = os.path.relpath(os.path.join(folder, name), root)
                    out.append((rel, top in LIBRARY_DIRS))
    return sorted(out)


def violations_in(rel, src, library):
    """(key, text) of each rule `src` (the file `rel`) breaks."""
    found = []
    lines = src.count("\n") + (0 if src.endswith("\n") or not src else 1)
    if library and lines > FILE_LIMIT:
        found.append((rel, f"{rel}: {lines} lines (limit {FILE_LIMIT} for library files)"))
    functions = python_functions(src) if rel.endswith(".py") else cpp_functions(src)
    for name, first, last in functions:
        length = last - first + 1
        if length > FUNCTION_LIMIT:
            found.append((f"{rel}:{name}", f"{rel}:{first}: function {name} is {length} lines "
                                            f"(limit {FUNCTION_LIMIT})"))
    return found


def run(root):
    failures = []
    for rel, library in source_files(root):
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            src = f.read()
        failures.extend(text for _, text in violations_in(rel, src, library))
    if failures:
        print("size rules broken (docs/design.md, \"Rules the build checks\"):")
        for text in failures:
            print(f"  {text}")
        return 1
    print("size rules: ok")
    return 0


# --- self-test ----------------------------------------------------------------------------------

def _body(lines):
    return "\n".join(f"  x += {i};" for i in range(lines))


class ScannerTest(unittest.TestCase):
    def names(self, src):
        return {name: last - first + 1 for name, first, last in cpp_functions(src)}

    def test_free_function_counts_brace_to_brace(self):
        self.assertEqual(self.names("int f(int x) {\n" + _body(3) + "\n}\n"), {"f": 5})

    def test_namespace_and_class_are_not_functions(self):
        src = "namespace a {\nstruct s {\n  int g() const noexcept { return 1; }\n};\n}\n"
        self.assertEqual(self.names(src), {"g": 1})

    def test_lambda_counts_toward_enclosing_function(self):
        src = "void f() {\n  auto l = [](int y) {\n    return y;\n  };\n  l(1);\n}\n"
        self.assertEqual(self.names(src), {"f": 6})

    def test_behaviour_list_counts_toward_make_behavior(self):
        src = ("caf::behavior actor::make_behavior() {\n  return {\n"
               "    [this](int x) {\n      return x;\n    },\n"
               "    [this](double y) {\n      return y;\n    },\n  };\n}\n")
        self.assertEqual(self.names(src), {"actor::make_behavior": 10})

    def test_braces_in_comments_strings_and_chars_are_ignored(self):
        src = ('void f() {\n  // }\n  /* { */\n  const char* s = "}{";\n  char c = \'}\';\n'
               '  auto r = R"x(})x";\n  int n = 1\'000;\n}\nvoid g() {}\n')
        self.assertEqual(self.names(src), {"f": 8, "g": 1})

    def test_constructor_init_list_with_braces(self):
        src = "s::s(int x) : a_{x}, b_(x) {\n  go();\n}\nt::t() : a_(1), b_{2} {\n}\n"
        self.assertEqual(self.names(src), {"s::s": 3, "t::t": 2})

    def test_initializers_and_enums_are_not_functions(self):
        src = ("enum class e : int { a, b };\nconst std::array<int, 2> v = {1, 2};\n"
               "alignas(64) std::atomic<int> n{0};\nauto h() -> int {\n  return 1;\n}\n"
               "template <class T = int>\nrequires std::integral<T> T k(T t) { return t; }\n")
        self.assertEqual(self.names(src), {"h": 3, "k": 1})

    def test_long_function_is_reported_and_short_is_not(self):
        src = "void long_one() {\n" + _body(59) + "\n}\nvoid short_one() {\n" + _body(58) + "\n}\n"
        found = violations_in("sys/x.cpp", src, library=True)
        self.assertEqual([key for key, _ in found], ["sys/x.cpp:long_one"])

    def test_long_library_file_is_reported(self):
        src = "int x;\n" * (FILE_LIMIT + 1)
        self.assertEqual([k for k, _ in violations_in("sys/y.hpp", src, True)], ["sys/y.hpp"])
        self.assertEqual(violations_in("tools/y.hpp", src, False), [])

    def test_python_functions_are_measured(self):
        src = "def f():\n" + "\n".join("    x = 1" for _ in range(60)) + "\n"
        self.assertEqual([k for k, _ in violations_in("python/m.py", src, False)], ["python/m.py:f"])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.dirname(here))
    parser.add_argument("--self-test", action="store_true", help="test the scanner and exit")
    args = parser.parse_args()
    if args.self_test:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(ScannerTest)
        return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1
    return run(args.root)


if __name__ == "__main__":
    sys.exit(main())
