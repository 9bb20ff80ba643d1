#!/usr/bin/env python3
"""A CuPy workload under CuPy's default memory pool, under uma (python/uma_cupy: CuPy's pool in
front of uma, the default), under uma with a uma block per array (uma_blocks) and under CuPy's
pool over plain cudaMallocManaged (managed_pool: what managed memory itself costs), one process
each (issue 13): per iteration, elementwise chains and reductions over arrays of mixed sizes
(1 K to 4 M floats, each making several temporaries) and two 1024x1024 matmuls. Iteration time
between two synchronizes, median over --iterations after --warmup. Both runs use the same seed;
their checksums must agree (memory handed out wrongly would change them).

    UMA_LIBRARY=.../libuma_c.so python3 bench/python/cupy_workload.py [--iterations 50]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ALLOCATORS = ("cupy_pool", "uma", "uma_blocks", "managed_pool")
SIZES = (1 << 10, 3000, 1 << 14, 77777, 1 << 18, 1 << 20, 1 << 22, 1 << 16)


def workload(cp, a, b, rounds):
    """One iteration; returns a scalar array (the checksum)."""
    total = cp.zeros((), dtype=cp.float32)
    for r in range(rounds):
        for k, n in enumerate(SIZES):
            x = cp.arange(n, dtype=cp.float32) * (0.001 * (k + 1)) - r
            y = cp.exp(-x * x * 1e-6) + cp.sin(x) * 0.5
            z = cp.sqrt(cp.abs(y)) * y
            total += z.sum() * 1e-6 + y.max()
    m = a @ b
    total += (cp.tanh(m) @ a).mean()
    return total


def child(args):
    name = args.child
    if args.dry_run:
        library = common.library_path("uma") if name.startswith("uma") else None
        common.emit({"allocator": name, "dry_run": True, "library": library})
        return
    uma_cupy = None
    if name.startswith("uma"):
        sys.path.insert(0, common.PYTHON_DIR)
        import uma_cupy
        uma_cupy.install(common.require_library("uma"), pool=name == "uma",
                         **common.parse_uma_options(args.uma_option))
    import cupy as cp
    own_pool = cp.get_default_memory_pool()
    if name == "managed_pool":
        own_pool = cp.cuda.MemoryPool(cp.cuda.malloc_managed)
        cp.cuda.set_allocator(own_pool.malloc)
    state = cp.random.RandomState(0)
    a = state.standard_normal((1024, 1024), dtype=cp.float32) * 0.03
    b = state.standard_normal((1024, 1024), dtype=cp.float32) * 0.03
    for _ in range(args.warmup):
        workload(cp, a, b, args.rounds)
    cp.cuda.Device().synchronize()
    samples = []
    for _ in range(args.iterations):
        started = time.perf_counter()
        checksum = workload(cp, a, b, args.rounds)
        cp.cuda.Device().synchronize()
        samples.append((time.perf_counter() - started) * 1e3)
    result = {"allocator": name, "ms": common.summary(samples), "checksum": float(checksum),
              "managed": common.count_managed([a.data.ptr, b.data.ptr, checksum.data.ptr]),
              "cupy": cp.__version__}
    if uma_cupy is not None:
        result["uma_stats"] = uma_cupy.stats()
        pool = uma_cupy.memory_pool()
        if pool is not None:
            result["pool_used_bytes"], result["pool_total_bytes"] = pool.used_bytes(), \
                pool.total_bytes()
    else:
        pool = own_pool
        result["pool_used_bytes"], result["pool_total_bytes"] = pool.used_bytes(), \
            pool.total_bytes()
    common.emit(result)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser, ALLOCATORS)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=4, help="passes over the sizes per "
                        "iteration")
    args = parser.parse_args()
    if args.iterations < 1 or args.warmup < 0 or args.rounds < 1:
        parser.error("--iterations and --rounds must be positive, --warmup not negative")
    if args.child:
        common.checked_allocators(args.child, ALLOCATORS)
        return child(args)
    names = common.checked_allocators(args.allocators, ALLOCATORS)
    names, results = common.collect(__file__, names, args,
                                    lambda r: r.get("ms", {}).get("median"))
    print(f"\n== CuPy workload ({args.rounds} rounds over {len(SIZES)} sizes + 2 matmuls per "
          "iteration)")
    baseline = results[names[0]].get("ms", {}).get("median")
    rows = []
    for name in names:
        result = results[name]
        ms = result.get("ms", {})
        managed = result.get("managed")
        rows.append([name, common.fmt(ms.get("median"), 3), common.fmt(ms.get("p99"), 3),
                     common.fmt(common.ratio(ms.get("median"), baseline), 3),
                     common.fmt(result.get("checksum"), 6),
                     "|".join(sorted(set(str(v) for v in managed.values()))) + "/3"
                     if managed else "-"])
        if "error" in result:
            print(f"{name}: FAILED: {result['error'].splitlines()[0]}")
    common.print_table(["allocator", "median ms", "p99 ms", f"x {names[0]}", "checksum",
                        "managed"], rows)
    common.print_rounds(names, results)
    for name in names:
        stats, result = results.get(name, {}).get("uma_stats"), results.get(name, {})
        if stats:
            pool = "" if "pool_total_bytes" not in result else \
                f"; CuPy's pool in front: used {result['pool_used_bytes']} of " \
                f"{result['pool_total_bytes']} bytes"
            print(f"{name}: cache hits {stats['cache_hits']}, misses {stats['cache_misses']}, "
                  f"in use {stats['cache_in_use_bytes']} bytes, live {stats['live_bytes']} "
                  f"bytes{pool}")
    common.write_json(args.json, {"benchmark": "cupy_workload", "args": vars(args),
                                  "environment": common.environment_report(),
                                  "results": results})
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
