"""uma_torch's PyTorch memory tools without a GPU (python/uma_torch/memory.py, pool.py): under a
stand-in torch (fakes/torch) whose pluggable allocator resolves the real libuma_c.so's hooks,
memory_stats() and its helpers in PyTorch's keys, the peak reset, memory_snapshot() with the
recorded frames, set_per_process_memory_fraction reaching uma's budget and the spill, and the
refusals of pool() and offload() where they cannot work."""

import os
import textwrap
import unittest

from support import library_path, run_fresh

PRELUDE = """
    import json, os, sys
    import uma_c, uma_torch
    import torch
    import torch.cuda.memory as m
    uma_torch.install(backend="host", quota_bytes=256 << 20)
    def malloc(n):
        return m.current.malloc(n, 0, None)
    def free(p, n):
        m.current.free(p, n, 0, None)
"""


def fresh(code):
    os.environ["UMA_LIBRARY"] = library_path()
    return run_fresh(textwrap.dedent(PRELUDE) + textwrap.dedent(code), fakes=True)[0]


class MemoryTools(unittest.TestCase):
    def test_memory_stats_in_pytorch_keys(self):
        r = fresh("""
            a = malloc(1000); b = malloc(3 << 20); free(a, 1000)
            stats = uma_torch.memory_stats()
            peak = uma_torch.max_memory_allocated()
            uma_torch.reset_peak_memory_stats()
            print(json.dumps(dict(stats=stats, peak=peak, allocated=uma_torch.memory_allocated(),
                                  after_reset=uma_torch.max_memory_allocated(),
                                  reserved=uma_torch.memory_reserved(),
                                  ordered=list(stats) == sorted(stats))))
            """)
        self.assertEqual(r["stats"]["allocation.all.current"], 1)
        self.assertEqual(r["stats"]["allocated_bytes.small_pool.allocated"], 1024)
        self.assertEqual(r["stats"]["allocated_bytes.large_pool.current"], 3 << 20)
        self.assertEqual(r["stats"]["requested_bytes.all.allocated"], 1000 + (3 << 20))
        self.assertEqual(r["peak"], 1024 + (3 << 20))
        self.assertEqual(r["allocated"], 3 << 20)
        self.assertEqual(r["after_reset"], 3 << 20)
        self.assertGreaterEqual(r["reserved"], 3 << 20)
        self.assertTrue(r["ordered"])

    def test_snapshot_has_the_live_blocks_and_the_allocating_frames(self):
        r = fresh("""
            uma_torch.record_memory_history()
            def make_weights():
                return malloc(5 << 20)
            w = make_weights(); scratch = malloc(4096); free(scratch, 4096)
            snap = uma_torch.memory_snapshot()
            uma_torch.record_memory_history(None)
            later = malloc(8192)
            after = uma_torch.memory_snapshot()
            segment = snap["segments"][0]
            print(json.dumps(dict(
                addresses=[s["address"] for s in snap["segments"]], w=w,
                kinds=[s["segment_type"] for s in snap["segments"]],
                frames=[f["name"] for f in segment["blocks"][0]["frames"]],
                actions=[t["action"] for t in snap["device_traces"][0]],
                after_traces=after["device_traces"][0], after_segments=len(after["segments"]))))
            """)
        self.assertEqual(r["addresses"], [r["w"]])
        self.assertEqual(r["kinds"], ["large"])
        self.assertEqual(r["frames"][:2], ["malloc", "make_weights"])  # innermost first
        self.assertEqual(r["actions"], ["alloc", "alloc", "free_requested", "free_completed"])
        self.assertEqual(r["after_traces"], [])  # stopping the history drops it
        self.assertEqual(r["after_segments"], 2)  # the live blocks are known without it

    def test_history_arguments_are_checked(self):
        r = fresh("""
            out = []
            for kwargs in (dict(enabled="sometimes"), dict(stacks="cpp")):
                try:
                    uma_torch.record_memory_history(**kwargs); out.append("accepted")
                except ValueError as error:
                    out.append(str(error))
            print(json.dumps(out))
            """)
        self.assertIn("enabled='sometimes'", r[0])
        self.assertIn("stacks='cpp'", r[1])

    def test_memory_fraction_sets_the_budget_and_spills_past_it(self):
        r = fresh("""
            memory = uma_torch.residency()["devices"][0]["memory_bytes"]
            hooked = [c[0] for c in m.calls]
            torch.cuda.set_per_process_memory_fraction((64 << 20) / memory)
            budget = uma_torch.residency()["devices"][0]["budget_bytes"]
            a = malloc(48 << 20); b = malloc(32 << 20)
            print(json.dumps(dict(hooked=hooked, budget=budget, spilled=uma_torch.spilled_bytes())))
            """)
        self.assertIn("set_memory_fraction_fn", r["hooked"])
        self.assertLessEqual(abs(r["budget"] - (64 << 20)), 1)
        self.assertEqual(r["spilled"], 32 << 20)


class Refusals(unittest.TestCase):
    def test_graph_trees_under_the_install_name_the_pool(self):
        r = fresh("""
            try:
                torch._C._cuda_checkPoolLiveAllocations(0, (0, 1), set()); out = "answered"
            except RuntimeError as error:
                out = str(error)
            print(json.dumps(out))
            """)
        self.assertIn("uma_torch.pool()", r)
        self.assertIn("pluggable does not yet support checkPoolLiveAllocations", r)

    def test_pool_needs_a_pytorch_with_mem_pools(self):
        r = fresh("""
            try:
                uma_torch.pool(); out = "made"
            except uma_torch.PoolError as error:
                out = str(error)
            print(json.dumps(out))
            """)
        self.assertIn("torch.cuda.MemPool", r)

    def test_offload_names_the_pool_when_the_model_is_not_uma_memory(self):
        r = run_fresh(textwrap.dedent("""
            import json, uma_torch, torch
            class Model(torch.nn.Module):
                pass
            try:
                uma_torch.offload(Model(), budget_bytes=1 << 20); out = "offloaded"
            except uma_torch.OffloadError as error:
                out = str(error)
            except TypeError as error:
                out = "TypeError: " + str(error)
            print(json.dumps(out))
            """), fakes=True)[0]
        self.assertIn("uma_torch.pool()", r)


if __name__ == "__main__":
    unittest.main()
