#!/usr/bin/env python3
"""64 KiB allocate+release from Python: `t = torch.empty(65536, dtype=torch.uint8,
device="cuda"); del t`, median and p99 per pair, one process per allocator (issue 13).

Each pair is timed alone with time.perf_counter_ns (no synchronize: neither allocator waits for
the GPU on this path). Allocators as in torch_step.py; default: native, uma, naive_cache,
naive_managed.

    UMA_BENCH_LIB_DIR=DIR python3 bench/python/torch_alloc.py [--pairs 20000]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from torch_step import install_allocator  # noqa: E402

ALLOCATORS = ("native", "uma", "naive_cache", "naive_managed")
BYTES = 65536


def child(args):
    name = args.child
    pairs = min(args.pairs, args.slow_pairs) if name == "naive_managed" else args.pairs
    if args.dry_run:
        library = None if name == "native" else common.library_path(
            common.PLUGGABLE.get(name, ("uma",))[0])
        common.emit({"allocator": name, "dry_run": True, "library": library, "pairs": pairs})
        return
    uma_torch = install_allocator(name, common.parse_uma_options(args.uma_option))
    import torch
    keep = torch.empty(BYTES, dtype=torch.uint8, device="cuda")  # CUDA initialised, warm
    for _ in range(min(pairs, 1000)):
        t = torch.empty(BYTES, dtype=torch.uint8, device="cuda")
        del t
    samples = [0.0] * pairs
    clock = time.perf_counter_ns
    for i in range(pairs):
        started = clock()
        t = torch.empty(BYTES, dtype=torch.uint8, device="cuda")
        del t
        samples[i] = (clock() - started) / 1e3
    del keep
    torch.cuda.synchronize()
    result = {"allocator": name, "pairs": pairs, "us": common.summary(samples),
              "device": torch.cuda.get_device_name(0)}
    if uma_torch is not None:
        result["uma_stats"] = uma_torch.stats()
    common.emit(result)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser, ALLOCATORS)
    parser.add_argument("--pairs", type=int, default=20000)
    parser.add_argument("--slow-pairs", type=int, default=2000,
                        help="pairs for naive_managed (cudaMallocManaged+cudaFree each)")
    args = parser.parse_args()
    if args.pairs < 1 or args.slow_pairs < 1:
        parser.error("--pairs and --slow-pairs must be positive")
    if args.child:
        common.checked_allocators(args.child, ALLOCATORS)
        return child(args)
    names = common.checked_allocators(args.allocators, ALLOCATORS)
    names, results = common.collect(__file__, names, args,
                                    lambda r: r.get("us", {}).get("median"))
    print(f"\n== 64 KiB torch.empty + del from Python, 1 thread")
    baseline = results[names[0]].get("us", {}).get("median")
    rows = []
    for name in names:
        us = results[name].get("us", {})
        rows.append([name, common.fmt(us.get("median")), common.fmt(us.get("p99")),
                     common.fmt(common.ratio(us.get("median"), baseline), 3),
                     common.fmt(results[name].get("pairs"))])
        if "error" in results[name]:
            print(f"{name}: FAILED: {results[name]['error'].splitlines()[0]}")
    common.print_table(["allocator", "median us", "p99 us", f"x {names[0]}", "pairs"], rows)
    common.print_rounds(names, results)
    stats = results.get("uma", {}).get("uma_stats")
    if stats:
        print(f"uma: cache hits {stats['cache_hits']}, misses {stats['cache_misses']}, "
              f"in use at exit {stats['cache_in_use_bytes']} bytes")
    common.write_json(args.json, {"benchmark": "torch_alloc", "args": vars(args),
                                  "environment": common.environment_report(),
                                  "results": results})
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
