"""PyTorch's memory tools and pools in libuma_c (issue 36; python/uma_c/torch_tools.py), on the
host backend without PyTorch: the hooks' ledger against PyTorch's counting rules (c10's
CUDACachingAllocator: 512-byte rounding, the small pool up to 1 MiB), peak and accumulated
resets, the live blocks, the observer, the memory-fraction hook, and the pools' slot functions.
Each case runs in a fresh process: the hooks' default allocator and ledger are per process."""

import unittest

from support import library_path, run_fresh

PRELUDE = """
import ctypes, json, os
os.environ["UMA_BACKEND"] = "host"
import uma_c
from uma_c import torch_tools
path, lib = uma_c.library(@LIBRARY@)
def rounded(n):
    return max(512, (n + 511) // 512 * 512)
def malloc(size):
    return lib.uma_torch_malloc(size, 0, None)
def free(p, size):
    lib.uma_torch_free(p, size, 0, None)
"""


def fresh(body):
    result, _ = run_fresh((PRELUDE + body).replace("@LIBRARY@", repr(library_path())))
    return result


class Ledger(unittest.TestCase):
    def test_counts_as_pytorch_does(self):
        r = fresh("""
sizes = [1, 511, 512, 513, 65536, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20]
blocks = [(malloc(n), n) for n in sizes]
for p, n in blocks[::2]:
    free(p, n)
print(json.dumps({"stats": torch_tools.memory_stats(lib, 0), "sizes": sizes}))
""")
        stats, sizes = r["stats"], r["sizes"]
        rounded = [max(512, (n + 511) // 512 * 512) for n in sizes]
        kept = list(zip(sizes, rounded))[1::2]
        small = [(n, b) for n, b in zip(sizes, rounded) if b <= 1 << 20]
        self.assertEqual(stats["allocation.all.allocated"], len(sizes))
        self.assertEqual(stats["allocation.all.freed"], (len(sizes) + 1) // 2)
        self.assertEqual(stats["allocation.all.current"], len(kept))
        self.assertEqual(stats["allocated_bytes.all.allocated"], sum(rounded))
        self.assertEqual(stats["allocated_bytes.all.current"], sum(b for _, b in kept))
        self.assertEqual(stats["allocated_bytes.all.peak"], sum(rounded))
        self.assertEqual(stats["requested_bytes.all.allocated"], sum(sizes))
        self.assertEqual(stats["allocated_bytes.small_pool.allocated"], sum(b for _, b in small))
        self.assertEqual(stats["allocated_bytes.large_pool.allocated"],
                         sum(rounded) - sum(b for _, b in small))
        self.assertEqual(stats["active_bytes.all.current"], stats["allocated_bytes.all.current"])
        self.assertGreaterEqual(stats["reserved_bytes.all.peak"], sum(rounded))
        self.assertEqual(stats["num_ooms"], 0)

    def test_resets(self):
        r = fresh("""
a = malloc(1 << 20); b = malloc(2 << 20); free(b, 2 << 20)
before = torch_tools.memory_stats(lib, 0)
torch_tools.reset_peak_memory_stats(lib, 0)
peaks = torch_tools.memory_stats(lib, 0)
torch_tools.reset_accumulated_memory_stats(lib, 0)
totals = torch_tools.memory_stats(lib, 0)
c = malloc(512)
after = torch_tools.memory_stats(lib, 0)
print(json.dumps([before, peaks, totals, after]))
""")
        before, peaks, totals, after = r
        self.assertEqual(before["allocated_bytes.all.peak"], 3 << 20)
        self.assertEqual(peaks["allocated_bytes.all.peak"], 1 << 20)
        self.assertEqual(peaks["allocated_bytes.all.allocated"], 3 << 20)
        self.assertEqual(totals["allocated_bytes.all.allocated"], 0)
        self.assertEqual(totals["allocated_bytes.all.freed"], 0)
        self.assertEqual(totals["allocated_bytes.all.current"], 1 << 20)
        self.assertEqual(after["allocated_bytes.all.allocated"], 512)
        self.assertEqual(after["allocated_bytes.all.peak"], (1 << 20) + 512)

    def test_live_blocks_and_observer(self):
        r = fresh("""
seen = []
keep = torch_tools.set_observer(lib, lambda *call: seen.append(list(call)))
a = malloc(1000); b = malloc(5 << 20); free(a, 1000)
live = torch_tools.live_blocks(lib, 0)
torch_tools.set_observer(lib, None)
c = malloc(64)
print(json.dumps({"live": live, "seen": seen, "a": a, "b": b}))
""")
        self.assertEqual([(x["address"], x["size"]) for x in r["live"]], [(r["b"], 5 << 20)])
        self.assertEqual([call[:3] for call in r["seen"]],
                         [["alloc", r["a"], 1000], ["alloc", r["b"], 5 << 20],
                          ["free", r["a"], 1000]])


class MemoryFraction(unittest.TestCase):
    def test_fraction_becomes_the_budget(self):
        r = fresh("""
a = uma_c.Allocator.default(path)
memory = a.residency()["devices"][0]["memory_bytes"]
lib.uma_torch_set_memory_fraction(ctypes.c_double(0.25), 0)
quarter = a.residency()["devices"][0]["budget_bytes"]
for bad in ((0.0, 0), (1.5, 0), (0.5, 7), (float("nan"), 0)):
    lib.uma_torch_set_memory_fraction(ctypes.c_double(bad[0]), bad[1])
print(json.dumps({"memory": memory, "quarter": quarter,
                  "after_bad": a.residency()["devices"][0]["budget_bytes"]}))
""")
        self.assertEqual(r["quarter"], int(0.25 * r["memory"]))
        self.assertEqual(r["after_bad"], r["quarter"])


    def test_blocks_past_the_fraction_spill(self):
        r = fresh("""
a = uma_c.Allocator.default(path)
memory = a.residency()["devices"][0]["memory_bytes"]
limit = 64 << 20
lib.uma_torch_set_memory_fraction(ctypes.c_double(limit / memory), 0)
below = malloc(48 << 20)
none_yet = torch_tools.spilled_bytes(lib)
above = malloc(32 << 20)  # PyTorch now holds 80 MiB on the device: past the limit
spilled = torch_tools.spilled_bytes(lib)
advises = a.stats()["advises"]
free(above, 32 << 20)
lib.uma_torch_set_memory_fraction(ctypes.c_double(2 * limit / memory), 0)
again = malloc(32 << 20)  # 80 MiB held, now under the limit: not spilled
print(json.dumps({"none_yet": none_yet, "spilled": spilled, "advises": advises,
                  "advises_after": a.stats()["advises"],
                  "spilled_after": torch_tools.spilled_bytes(lib), "same": again == above}))
""")
        self.assertEqual(r["none_yet"], 0)
        self.assertEqual(r["spilled"], 32 << 20)
        self.assertGreaterEqual(r["advises"], 2)  # preferred location host, accessed by
        self.assertEqual(r["spilled_after"], 32 << 20)



class PoolSlots(unittest.TestCase):
    def test_slot_functions_serve_their_allocator(self):
        r = fresh("""
MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
first = uma_c.Allocator.create(path, backend="host", quota_bytes=256 << 20)
second = uma_c.Allocator.create(path, backend="host", quota_bytes=256 << 20)
m1, f1 = (T(p) for T, p in zip((MALLOC, FREE), first.torch_pool_functions()))
m2, f2 = (T(p) for T, p in zip((MALLOC, FREE), second.torch_pool_functions()))
p = m1(4 << 20, 0, None)
used = (first.stats()["cache_in_use_bytes"], second.stats()["cache_in_use_bytes"])
too_big = m2(1 << 30, 0, None)
f1(p, 4 << 20, 0, None)
after = first.stats()["cache_in_use_bytes"]
print(json.dumps({"p": p or 0, "used": used, "too_big": too_big or 0, "after": after}))
""")
        self.assertNotEqual(r["p"], 0)
        self.assertGreaterEqual(r["used"][0], 4 << 20)
        self.assertEqual(r["used"][1], 0)
        self.assertEqual(r["too_big"], 0)  # NULL: PyTorch's caching allocator's "out of memory"
        self.assertEqual(r["after"], 0)

    def test_slots_run_out_with_a_clear_error(self):
        r = fresh("""
made = [uma_c.Allocator.create(path, backend="host", scheduler_threads=1) for _ in range(17)]
bound = 0
try:
    for a in made:
        a.torch_pool_functions(); bound += 1
    message = None
except uma_c.UmaError as error:
    message, status = str(error), error.status_name
print(json.dumps({"bound": bound, "message": message, "status": status}))
""")
        self.assertEqual(r["bound"], 16)
        self.assertEqual(r["status"], "UMA_ERR_OUT_OF_MEMORY")
        self.assertIn("pool slots", r["message"])


if __name__ == "__main__":
    unittest.main()
