"""Shared plumbing of the framework benchmarks (bench/python/*.py).

Each benchmark script runs itself once per allocator as a subprocess (`--child NAME`), because a
framework's allocator can only be chosen before CUDA is initialised. A child prints one line
`UMA_BENCH_RESULT {json}` last; the parent collects those and prints one table with ratios
against the first allocator (the framework's own) from the same run.

Libraries (env): UMA_LIBRARY (libuma_c.so), UMA_NAIVE_MANAGED_LIBRARY, UMA_NAIVE_CACHE_LIBRARY;
or UMA_BENCH_LIB_DIR holding all three. python/ (uma_c, uma_torch, uma_cupy) is found from this
file's place in the repository.
"""

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

RESULT_PREFIX = "UMA_BENCH_RESULT "
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON_DIR = os.path.join(REPO, "python")

LIBRARIES = {  # key: (env var, file name)
    "uma": ("UMA_LIBRARY", "libuma_c.so"),
    "naive_managed": ("UMA_NAIVE_MANAGED_LIBRARY", "libuma_naive_managed.so"),
    "naive_cache": ("UMA_NAIVE_CACHE_LIBRARY", "libuma_naive_cache.so"),
}
# The pluggable baselines: allocator name -> (library key, malloc symbol, free symbol).
PLUGGABLE = {
    "naive_managed": ("naive_managed", "naive_managed_malloc", "naive_managed_free"),
    "naive_cache": ("naive_cache", "naive_cache_malloc", "naive_cache_free"),
}


def library_path(key):
    """The path of library `key` (see LIBRARIES), or None where it is not configured."""
    env, name = LIBRARIES[key]
    if os.environ.get(env):
        return os.path.abspath(os.environ[env])
    folder = os.environ.get("UMA_BENCH_LIB_DIR")
    return os.path.abspath(os.path.join(folder, name)) if folder else None


def require_library(key):
    path = library_path(key)
    if path is None or not os.path.isfile(path):
        env, name = LIBRARIES[key]
        raise SystemExit(f"bench: {name} not found (set {env} or UMA_BENCH_LIB_DIR; "
                         f"got {path!r})")
    return path


def parse_uma_options(pairs):
    """--uma-option KEY=INT|WORD ... -> dict for uma_torch/uma_cupy.install."""
    options = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"bench: --uma-option expects KEY=VALUE, got {pair!r}")
        options[key] = int(value, 0) if value.lstrip("-").isdigit() or value.startswith("0x") \
            else value
    return options


def add_common_arguments(parser, allocators):
    parser.add_argument("--allocators", default=",".join(allocators),
                        help=f"comma-separated, first is the baseline (default: %(default)s)")
    parser.add_argument("--child", metavar="ALLOCATOR", help=argparse.SUPPRESS)
    parser.add_argument("--dry-run", action="store_true",
                        help="run the subprocess plumbing without torch/cupy or a GPU")
    parser.add_argument("--json", metavar="PATH", help="also write all results as JSON here")
    parser.add_argument("--uma-option", action="append", metavar="KEY=VALUE",
                        help="uma config for the uma run (uma_c.CONFIG_FIELDS), repeatable")
    parser.add_argument("--child-timeout", type=float, default=300.0, metavar="SECONDS")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run every allocator N times, in interleaved rounds (A B C A B C "
                             "...), and report each allocator's middle run and every round's "
                             "median: run-to-run drift then hits all of them alike")
    parser.add_argument("--report-from", metavar="JSON",
                        help="print the table of a saved --json file instead of running")


def checked_allocators(text, known):
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if not names or unknown:
        raise SystemExit(f"bench: unknown allocator(s) {unknown or text!r}; known: "
                         f"{', '.join(known)}")
    return names


def require_libraries(names):
    """Fails fast, before any child runs, when a library an allocator needs is missing."""
    for name in names:
        if name.startswith("uma"):
            require_library("uma")
        elif name in PLUGGABLE:
            require_library(PLUGGABLE[name][0])


def collect(script, names, args, figure=None):
    """(names, results): from the children of this run, or from --report-from's file. With
    --repeat N > 1 the children run in N interleaved rounds; `figure(result)` (the number the
    script compares, e.g. a median) picks each allocator's middle run, whose result is kept
    with "rounds": every round's figure, in round order."""
    if args.report_from:
        with open(args.report_from) as saved:
            results = json.load(saved)["results"]
        return [name for name in names if name in results] or list(results), results
    if args.repeat < 1:
        raise SystemExit(f"bench: --repeat {args.repeat}: it must be at least 1")
    if not args.dry_run:
        require_libraries(names)
    rounds = [run_children(os.path.abspath(script), names, sys.argv[1:], args.child_timeout,
                           figure) for _ in range(args.repeat)]
    if len(rounds) == 1 or figure is None:
        return names, rounds[-1]
    return names, {name: middle_run([r[name] for r in rounds], figure) for name in names}


def middle_run(runs, figure):
    """The run whose figure is the median of the runs' figures (a failed run loses), with
    "rounds" listing every run's figure (None for a failed one, or one without a figure)."""
    figures = [None if "error" in run else figure(run) for run in runs]
    good = sorted((f, i) for i, f in enumerate(figures) if f is not None)
    chosen = dict(runs[good[(len(good) - 1) // 2][1]]) if good else dict(runs[-1])
    chosen["rounds"] = figures
    return chosen


def print_rounds(names, results):
    """One line per allocator with its rounds' figures, when the run had several ("-": the
    round failed or gave no figure)."""
    for name in names:
        rounds = results.get(name, {}).get("rounds")
        if rounds:
            shown = ", ".join(fmt(f, 3) for f in rounds)
            print(f"{name}: rounds {shown}")


def emit(result):
    """A child's last line: its result for the parent."""
    sys.stdout.flush()
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_children(script, names, child_args, timeout, figure=None):
    """Runs `script --child NAME child_args` for each name, one after the other; returns
    {name: result}, a failed child giving {"error": ...} with the tail of its output. With
    `figure`, each child's figure is printed as it finishes: a run cut short (a time limit
    around the whole script) still shows what it measured, though its table never prints."""
    results = {}
    for name in names:
        command = [sys.executable, script, "--child", name] + child_args
        print(f"--- {os.path.basename(script)}: {name}", flush=True)
        started = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
            output, code = done.stdout, done.returncode
            errors = done.stderr
        except subprocess.TimeoutExpired as expired:
            output = expired.stdout.decode() if isinstance(expired.stdout, bytes) else \
                (expired.stdout or "")
            errors, code = f"timed out after {timeout:.0f} s", None
        result = None
        for line in output.splitlines():
            if line.startswith(RESULT_PREFIX):
                result = json.loads(line[len(RESULT_PREFIX):])
            else:
                print(f"    {line}")
        if code != 0 or result is None:
            tail = "\n".join((errors or "").strip().splitlines()[-15:])
            print(f"    FAILED (exit {code}):\n{tail}", flush=True)
            result = {"error": f"exit {code}: {tail}"}
        result["wall_s"] = round(time.monotonic() - started, 1)
        if figure is not None and "error" not in result:
            print(f"    {name}: {fmt(figure(result), 3)} in {result['wall_s']} s", flush=True)
        results[name] = result
    return results


def summary(samples):
    """median/p99/mean/min of a list of numbers (p99: nearest rank)."""
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, int(round(0.99 * len(ordered))) - 1))
    return {"median": statistics.median(ordered), "p99": ordered[rank],
            "mean": statistics.fmean(ordered), "min": ordered[0], "n": len(ordered)}


def fmt(value, digits=2):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def print_table(header, rows):
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    for row in [header] + rows:
        print("  ".join(str(cell).rjust(width) for cell, width in zip(row, widths)))


def ratio(value, baseline):
    if value is None or not baseline:
        return None
    return value / baseline


def write_json(path, document):
    if path:
        with open(path, "w") as out:
            json.dump(document, out, indent=2)
        print(f"wrote {path}")


def environment_report():
    """What ran: Python, and where importable the framework versions and the GPU."""
    report = {"python": sys.version.split()[0]}
    for module in ("torch", "cupy", "transformers"):
        try:
            report[module] = __import__(module).__version__
        except Exception as error:  # not installed here: say so
            report[module] = f"unavailable ({type(error).__name__})"
    return report


# --- the pointer-kind check ------------------------------------------------------------------

def pointer_checkers():
    """[(description, check(ptr) -> bool is-managed)]: cuda-python's runtime binding where
    importable, and always the driver's cuPointerGetAttribute through ctypes as a cross-check."""
    checkers = []
    try:
        from cuda.bindings import runtime as rt

        def by_runtime(ptr):
            err, attributes = rt.cudaPointerGetAttributes(ptr)
            if err != rt.cudaError_t.cudaSuccess:
                raise RuntimeError(f"cudaPointerGetAttributes({ptr:#x}): {err}")
            return attributes.type == rt.cudaMemoryType.cudaMemoryTypeManaged

        checkers.append(("cuda.bindings.runtime.cudaPointerGetAttributes: type == "
                         "cudaMemoryTypeManaged", by_runtime))
    except ImportError:
        pass
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        get = libcuda.cuPointerGetAttribute
        get.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
        get.restype = ctypes.c_int
        is_managed = 8  # CU_POINTER_ATTRIBUTE_IS_MANAGED

        def by_driver(ptr):
            value = ctypes.c_int(0)
            status = get(ctypes.byref(value), is_managed, ptr)
            if status != 0:
                raise RuntimeError(f"cuPointerGetAttribute({ptr:#x}): CUresult {status}")
            return bool(value.value)

        checkers.append(("libcuda cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_IS_MANAGED)",
                         by_driver))
    except OSError:
        pass
    return checkers


def count_managed(pointers):
    """{checker description: managed count or the error} for a list of addresses."""
    counts = {}
    for description, check in pointer_checkers():
        try:
            counts[description] = sum(1 for ptr in pointers if check(ptr))
        except Exception as error:  # one checker failing must not hide the other's answer
            counts[description] = f"error: {error}"
    return counts
