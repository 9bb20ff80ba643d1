"""uma_cupy.install() against a stand-in CuPy (fakes/cupy) and the real libuma_c.so."""

import os
import textwrap
import unittest

from support import library_path, run_fresh


def fresh(code, fakes=True):
    os.environ["UMA_LIBRARY"] = library_path()
    prelude = "import gc, json, os, sys\nimport uma_c, uma_cupy\n"
    return run_fresh(prelude + textwrap.dedent(code), fakes=fakes)[0]


class UmaCupyTest(unittest.TestCase):
    def test_install_refuses_clearly_when_cupy_is_missing(self):
        result = fresh("""
            sys.modules["cupy"] = None
            try:
                uma_cupy.install(backend="host")
                outcome = "installed"
            except uma_cupy.InstallError as error:
                outcome = str(error)
            print(json.dumps(dict(outcome=outcome)))
            """, fakes=False)
        self.assertIn("CuPy is not importable", result["outcome"])

    def test_blocks_come_from_uma_on_the_current_device_and_stream_and_go_back_when_dropped(self):
        result = fresh("""
            import cupy
            previous = cupy.cuda.memory.get_allocator()
            uma_cupy.install(backend="host", quota_bytes=64 << 20, pool=False)
            cupy.cuda.runtime.device = 0
            cupy.cuda.current_stream = cupy.cuda.Stream(0xABC0)
            before = uma_cupy.stats()["cache_in_use_bytes"]
            pointer = cupy.cuda.memory.get_allocator()(1 << 20)
            owner = pointer.mem._owner
            during = uma_cupy.stats()["cache_in_use_bytes"]
            seen = dict(ptr=pointer.ptr == pointer.mem.ptr != 0, size=pointer.mem.size,
                        device=pointer.mem.device_id, stream=owner.stream)
            del pointer, owner
            gc.collect()
            after = uma_cupy.stats()["cache_in_use_bytes"]
            uma_cupy.uninstall()
            print(json.dumps(dict(seen=seen, grew=during - before, after=after, before=before,
                                  restored=cupy.cuda.memory.get_allocator() is previous,
                                  installed=uma_cupy.is_installed())))
            """)
        self.assertEqual(result["seen"], dict(ptr=True, size=1 << 20, device=0, stream=0xABC0))
        self.assertGreaterEqual(result["grew"], 1 << 20)
        self.assertEqual(result["after"], result["before"], "dropping the memory freed it")
        self.assertTrue(result["restored"])
        self.assertFalse(result["installed"])

    def test_a_request_over_the_quota_raises_a_memory_error_with_the_status(self):
        result = fresh("""
            import cupy
            uma_cupy.install(backend="host", quota_bytes=4 << 20, policy="direct", pool=False)
            try:
                cupy.cuda.memory.get_allocator()(64 << 20)
                outcome = "allocated"
            except MemoryError as error:
                outcome = error.status_name
            print(json.dumps(dict(outcome=outcome)))
            """)
        self.assertEqual(result["outcome"], "UMA_ERR_QUOTA_EXCEEDED")

    def test_by_default_cupys_pool_sits_in_front_and_trim_empties_it_first(self):
        result = fresh("""
            import cupy
            uma_cupy.install(backend="host", quota_bytes=64 << 20)
            pool = uma_cupy.memory_pool()
            current = cupy.cuda.memory.get_allocator()
            pointer = current(1 << 20)
            during = uma_cupy.stats()["cache_requested_bytes"]
            del pointer
            gc.collect()
            uma_cupy.trim()
            print(json.dumps(dict(
                pool_type=type(pool).__name__, hooked=current == pool.malloc,
                under=pool.allocator.__name__, during=during,
                emptied=pool.free_all_blocks_calls, live=uma_cupy.stats()["live_bytes"])))
            """)
        self.assertEqual(result["pool_type"], "MemoryPool")
        self.assertTrue(result["hooked"], "CuPy allocates through the pool")
        self.assertEqual(result["under"], "uma_cupy_malloc", "the pool takes its segments from uma")
        self.assertEqual(result["during"], 1 << 20)
        self.assertEqual(result["emptied"], 1, "trim empties CuPy's pool before uma's cache")
        self.assertEqual(result["live"], 0)

    def test_a_bad_pool_argument_is_refused_and_installs_nothing(self):
        result = fresh("""
            import cupy
            try:
                uma_cupy.install(backend="host", pool="yes")
                outcome = "installed"
            except TypeError as error:
                outcome = str(error)
            print(json.dumps(dict(outcome=outcome, installed=uma_cupy.is_installed(),
                                  untouched=cupy.cuda.memory.get_allocator()
                                  is cupy.cuda.memory.default_pool_malloc)))
            """)
        self.assertIn("pool must be True or False", result["outcome"])
        self.assertFalse(result["installed"])
        self.assertTrue(result["untouched"])

    def test_plans_name_each_arrays_range_on_cupys_current_stream(self):
        result = fresh("""
            import cupy, uma_fake_plans
            fake = uma_fake_plans.install(os.environ["UMA_LIBRARY"])
            uma_cupy.install(backend="host", quota_bytes=64 << 20, pool=False)
            cupy.cuda.current_stream = cupy.cuda.Stream(0xABC0)
            a, b = cupy.ones(1024), cupy.ones(4096)
            uma_cupy.set_device_budget(0, 1 << 20)
            moved = uma_cupy.will_access([a, b], mode="write", policy="migrate")
            plan = fake.log[-1]
            uma_cupy.done_with([a, b])
            dead = uma_cupy.dead(b)
            outcomes = []
            fake.foreign.append((0x7E5700000000, 0x7E5700010000))
            class Foreign:
                nbytes = 64
                device = cupy.Device(0)
                data = type("P", (), {"ptr": 0x7E5700000000})()
            try:
                uma_cupy.will_access(Foreign())
            except uma_c.UmaError as error:
                outcomes.append(error.status_name)
            try:
                uma_cupy.will_access([cupy.ones(0)])
            except ValueError as error:
                outcomes.append("no array" in str(error))
            print(json.dumps(dict(
                ranges=plan[1] == [(a.data.ptr, 8192), (b.data.ptr, 32768)],
                options=[plan[2][k] for k in ("device", "mode", "policy", "stream")],
                moved=moved["to_device_bytes"], dead=dead["discarded_bytes"],
                outcomes=outcomes)))
            """)
        self.assertTrue(result["ranges"], "each array's own range, in order")
        self.assertEqual(result["options"], [0, "write", "migrate", 0xABC0])
        self.assertEqual(result["moved"], 8192 + 32768)
        self.assertEqual(result["dead"], 32768)
        self.assertEqual(result["outcomes"], ["UMA_ERR_UNKNOWN_POINTER", True])


if __name__ == "__main__":
    unittest.main()
