#!/usr/bin/env python3
"""uma's include rules (docs/design.md, "Rules the build checks").

  * Features: actors/ is cut by feature. The allocator is actors/ itself with actors/detail/;
    actors/remote/, actors/metrics/ and actors/c/ are features of their own that build on it (and
    actors/c/ on actors/remote/ too: the C ABI joins a node's arbiter). A
    library file includes the files of its own feature, the lower layers (sys/ memory/
    messages/), and of another feature only the headers outside detail/ of one it builds on:
    nothing of the allocator includes a feature built on it, and no feature reaches into
    another's detail/.
  * No include climbs back: a library file may include a header of a folder above its own (a
    file in actors/remote/detail/ one of actors/remote/ or actors/) only when nothing leads back
    from that header into the including file's folder: no header reachable from it, through the
    includes of each header and of the source beside it (same name, .cpp), lies in that folder
    or below. A detail that includes the public header of the code it serves closes a cycle and
    is refused; one that includes a config or vocabulary header its owner also uses is not.
  * Deprecated forwarders: each header of UMA_DEPRECATED_HEADERS (cmake/uma_public_headers.cmake,
    old paths kept for one release) includes exactly one uma header, its new path, and says so in
    a #pragma message; nothing in the repository includes a forwarder.

Includes are read as `#include <uma/LAYER/...>` (cmake/check_layers.cmake refuses quoted ones);
<uma/c/...> is actors/c/. There is no list of exceptions: a violation fails the check. Exit
status: 0 clean, 1 violations, 2 usage error.

  tools/check_includes.py [--root DIR]
  tools/check_includes.py --self-test
"""

import argparse
import os
import re
import sys
import unittest

LAYERS = ("sys", "memory", "messages", "actors")
LOWER_LAYERS = ("sys", "memory", "messages")
# feature folder -> the features it builds on ("actors" is the allocator)
FEATURES = {
    "actors": (),
    "actors/remote": ("actors",),
    "actors/metrics": ("actors",),
    "actors/c": ("actors", "actors/remote"),  # the C ABI joins a node's arbiter
}
SCANNED = LAYERS + ("tools", "tests", "examples", "bench")
SUFFIXES = (".cpp", ".hpp", ".h", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*<uma/([^>]+)>', re.M)
DEPRECATED_LIST = re.compile(r"set\(UMA_DEPRECATED_HEADERS\b(.*?)\)", re.S)


def repo_path(target):
    """The repository path of `<uma/TARGET>`."""
    return "actors/c/" + target[2:] if target.startswith("c/") else target


def includes_of(src):
    """Repository paths of the uma headers `src` includes, in order."""
    return [repo_path(t) for t in INCLUDE.findall(src)]


def folder_of(path):
    return os.path.dirname(path)


def is_under(path, folder):
    return path == folder or path.startswith(folder + "/")


def feature_of(path):
    """The feature folder `path` belongs to (the deepest one holding it), or None."""
    owners = [f for f in FEATURES if is_under(folder_of(path), f)]
    return max(owners, key=len) if owners else None


def is_library(path):
    return path.split("/", 1)[0] in LAYERS


# --- the rules ----------------------------------------------------------------------------------

def feature_violation(path, header):
    """Why `path` may not include `header` by the feature rule, or None."""
    mine, theirs = feature_of(path), feature_of(header)
    if mine is None or theirs is None or mine == theirs:
        return None
    if theirs not in FEATURES[mine]:
        return f"the {name(mine)} does not build on the {name(theirs)}"
    if "/detail/" in "/" + header[len(theirs):]:
        return f"{header} is a detail of the {name(theirs)}"
    return None


def name(feature):
    return "allocator" if feature == "actors" else f"feature {feature}/"


def sibling_source(header):
    stem, ext = os.path.splitext(header)
    return stem + ".cpp" if ext in (".hpp", ".h") else None


def reachable(header, graph):
    """Every header reachable from `header` (itself included) through the includes of each
    header and of the source beside it."""
    seen, todo = set(), [header]
    while todo:
        h = todo.pop()
        if h in seen:
            continue
        seen.add(h)
        todo.extend(graph.get(h, ()))
        todo.extend(graph.get(sibling_source(h), ()))
    return seen


def climb_violation(path, header, graph):
    """Why `path`'s include of `header` climbs back, or None."""
    here, there = folder_of(path), folder_of(header)
    if here == there or not is_under(here, there):
        return None
    back = sorted(h for h in reachable(header, graph) if is_under(folder_of(h), here))
    if not back:
        return None
    return f"it climbs to {there}/, and {header} leads back into {here}/ ({back[0]})"


def forwarder_violations(path, src, graph, files):
    """What is wrong with the deprecated forwarder `path` (text `src`)."""
    out = []
    targets = includes_of(src)
    if len(targets) != 1 or targets[0] not in files:
        out.append(f"{path}: a forwarder includes exactly one existing uma header")
    elif not re.search(r"#\s*pragma\s+message\b[^\n]*" + re.escape(targets[0].split("/", 1)[1]),
                       src):
        out.append(f"{path}: no #pragma message naming <uma/{targets[0]}>")
    return out


def check(files, deprecated=()):
    """Violations (text) of the rules among `files`, a map of repository path -> source text."""
    graph = {p: includes_of(s) for p, s in files.items()}
    failures = []
    for path in sorted(files):
        for header in graph[path]:
            if header in deprecated:
                failures.append(f"{path}: includes {header}, a deprecated forwarder")
                continue
            if not is_library(path) or path in deprecated:  # a forwarder has rules of its own
                continue
            why = feature_violation(path, header) or climb_violation(path, header, graph)
            if why:
                failures.append(f"{path}: includes {header}: {why}")
    for path in sorted(deprecated):
        if path not in files:
            failures.append(f"{path}: listed in UMA_DEPRECATED_HEADERS but missing")
        else:
            failures.extend(forwarder_violations(path, files[path], graph, files))
    return failures


# --- the repository -----------------------------------------------------------------------------

def read_files(root):
    out = {}
    for top in SCANNED:
        for folder, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith(SUFFIXES):
                    full = os.path.join(folder, n)
                    with open(full, encoding="utf-8", errors="replace") as f:
                        out[os.path.relpath(full, root)] = f.read()
    return out


def deprecated_headers(root):
    with open(os.path.join(root, "cmake", "uma_public_headers.cmake"), encoding="utf-8") as f:
        m = DEPRECATED_LIST.search(f.read())
    return set(m.group(1).split()) if m else set()


def run(root):
    failures = check(read_files(root), deprecated_headers(root))
    if failures:
        print("include rules broken (docs/design.md, \"Rules the build checks\"):")
        for text in failures:
            print(f"  {text}")
        return 1
    print("include rules: ok")
    return 0


# --- self-test ----------------------------------------------------------------------------------

def inc(*headers):
    return "".join(f"#include <uma/{h}>\n" for h in headers)


class RulesTest(unittest.TestCase):
    def test_detail_including_its_owners_public_header_climbs_back(self):
        files = {"actors/remote/gateway.hpp": "",
                 "actors/remote/gateway.cpp": inc("actors/remote/detail/sessions.hpp"),
                 "actors/remote/detail/sessions.hpp": inc("actors/remote/gateway.hpp")}
        [failure] = check(files)
        self.assertIn("actors/remote/detail/sessions.hpp: includes actors/remote/gateway.hpp",
                      failure)

    def test_climb_to_a_header_that_leads_nowhere_back_is_allowed(self):
        files = {"actors/remote/config.hpp": inc("messages/types.hpp"),
                 "messages/types.hpp": "",
                 "actors/remote/gateway.cpp": inc("actors/remote/detail/sessions.hpp"),
                 "actors/remote/detail/sessions.hpp": inc("actors/remote/config.hpp")}
        self.assertEqual(check(files), [])

    def test_a_cycle_through_another_header_is_found(self):
        files = {"memory/a.hpp": inc("memory/b.hpp"),
                 "memory/b.hpp": "",
                 "memory/b.cpp": inc("memory/detail/x.hpp"),
                 "memory/detail/x.hpp": inc("memory/a.hpp")}
        self.assertEqual(len(check(files)), 1)

    def test_sideways_includes_are_not_climbs(self):
        files = {"actors/remote/wire/detail/service.cpp": inc("actors/remote/detail/sessions.hpp"),
                 "actors/remote/detail/sessions.hpp": inc("actors/remote/wire/detail/x.hpp"),
                 "actors/remote/wire/detail/x.hpp": ""}
        self.assertEqual(check(files), [])

    def test_the_allocator_includes_no_feature_built_on_it(self):
        files = {"actors/detail/core.cpp": inc("actors/metrics/snapshot.hpp"),
                 "actors/metrics/snapshot.hpp": ""}
        [failure] = check(files)
        self.assertIn("the allocator does not build on the feature actors/metrics/", failure)

    def test_features_do_not_reach_into_details_or_each_other(self):
        files = {"actors/remote/a.cpp": inc("actors/detail/core.hpp", "actors/client.hpp",
                                            "actors/metrics/m.hpp"),
                 "actors/detail/core.hpp": "", "actors/client.hpp": "",
                 "actors/metrics/m.hpp": ""}
        failures = check(files)
        self.assertEqual(len(failures), 2, failures)
        self.assertIn("is a detail of the allocator", failures[0])
        self.assertIn("does not build on the feature actors/metrics/", failures[1])

    def test_programs_may_climb_but_not_include_forwarders(self):
        files = {"tools/cli.cpp": inc("actors/remote/detail/checks.hpp", "actors/old.hpp"),
                 "actors/remote/detail/checks.hpp": "",
                 "actors/old.hpp": '#pragma message("use <uma/actors/new.hpp>")\n'
                                   + inc("actors/new.hpp"),
                 "actors/new.hpp": ""}
        self.assertEqual(check(files, {"actors/old.hpp"}),
                         ["tools/cli.cpp: includes actors/old.hpp, a deprecated forwarder"])

    def test_a_forwarder_answers_to_its_own_rule_only(self):
        files = {"actors/old.hpp": '#pragma message("use <uma/actors/metrics/m.hpp>")\n'
                                   + inc("actors/metrics/m.hpp"),
                 "actors/metrics/m.hpp": ""}
        self.assertEqual(check(files, {"actors/old.hpp"}), [])

    def test_a_forwarder_names_its_new_header(self):
        files = {"actors/old.hpp": inc("actors/new.hpp"), "actors/new.hpp": ""}
        [failure] = check(files, {"actors/old.hpp"})
        self.assertIn("no #pragma message", failure)

    def test_c_headers_map_to_actors_c(self):
        self.assertEqual(includes_of("#include <uma/c/uma.h>\n"), ["actors/c/uma.h"])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.dirname(here))
    parser.add_argument("--self-test", action="store_true", help="test the rules and exit")
    args = parser.parse_args()
    if args.self_test:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(RulesTest)
        return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1
    return run(args.root)


if __name__ == "__main__":
    sys.exit(main())
