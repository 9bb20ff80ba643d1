"""The binding's plan calls (python/uma_c/plans.py, SPEC25): what reaches the C functions (through
the stand-in plan calls of fakes/uma_fake_plans.py, which decode the ctypes arguments), errors
as uma_c errors, bad arguments refused before the library is called; and, where libuma_c.so has
the plan calls, the same calls against it on the host backend."""

import ctypes
import os
import sys
import types
import unittest

from support import FAKES_DIR, MiB, library_path, uma_c

sys.path.insert(0, FAKES_DIR)
import uma_fake_plans  # noqa: E402

BOGUS = 0x7E5700000000


class FakePlanCallsTest(unittest.TestCase):
    def setUp(self):
        _, self.real = uma_c.library(library_path())
        self.fake = uma_fake_plans.FakePlans(self.real)
        self.allocator = uma_c.Allocator.create(library_path(), backend="host",
                                                quota_bytes=64 * MiB)
        self.allocator._lib = self.fake  # the plan calls go to the stand-in
        self.block = self.allocator.malloc(65536)

    def tearDown(self):
        self.allocator._lib = self.real
        self.allocator.free(self.block, 65536)
        self.allocator.close()

    def test_options_and_ranges_reach_the_c_call_as_given(self):
        result = self.allocator.will_access(
            [(self.block, 4096), (self.block + 8192, 100)], device=0, mode="write",
            policy="remote_map", stream=0x1234, wait_complete=True, cycle_bytes=1 << 30,
            cycle_plans=8, tenant="alice")
        name, ranges, options = self.fake.log[-1]
        self.assertEqual(name, "will_access")
        self.assertEqual(ranges, [(self.block, 4096), (self.block + 8192, 100)])
        self.assertEqual(options, {"device": 0, "mode": "write", "policy": "remote_map",
                                   "stream": 0x1234, "wait_complete": True,
                                   "cycle_bytes": 1 << 30, "cycle_plans": 8, "tenant": "alice"})
        self.assertEqual(result["mapped_bytes"], 4196)
        self.assertEqual(set(result), set(uma_c.PLAN_RESULT_FIELDS))

    def test_defaults_are_the_c_defaults_and_a_stream_object_is_its_address(self):
        self.allocator.will_access([(self.block, 4096)])
        self.assertEqual(self.fake.log[-1][2], {
            "device": 0, "mode": "read", "policy": "auto", "stream": None,
            "wait_complete": False, "cycle_bytes": 0, "cycle_plans": 0, "tenant": None})
        self.allocator.done_with([(self.block, 4096)])
        self.allocator.will_access([(self.block, 4096)], stream=types.SimpleNamespace(
            cuda_stream=0xBEEF))
        self.assertEqual(self.fake.log[-1][2]["stream"], 0xBEEF)
        self.allocator.will_access([(self.block + 4096, 4096)], stream=0)
        self.assertEqual(self.fake.log[-1][2]["stream"], 0, "0: on the legacy default stream")
        self.assertEqual(self.fake.log[-1][2]["policy"], "auto")

    def test_failures_raise_uma_errors_with_the_status_and_the_message(self):
        self.allocator.set_device_budget(0, 8192)
        with self.assertRaises(uma_c.UmaMemoryError) as over:
            self.allocator.will_access([(self.block, 16384)])
        self.assertEqual(over.exception.status_name, "UMA_ERR_QUOTA_EXCEEDED")
        self.assertIn("budget is 8192", over.exception.message)
        self.fake.foreign.append((BOGUS, BOGUS + 4096))
        with self.assertRaises(uma_c.UmaError) as unknown:
            self.allocator.dead([(BOGUS, 64)])
        self.assertEqual(unknown.exception.status_name, "UMA_ERR_UNKNOWN_POINTER")
        with self.assertRaises(uma_c.UmaError) as unplanned:
            self.allocator.done_with([(self.block, 4096)])
        self.assertEqual(unplanned.exception.status_name, "UMA_ERR_INVALID_ARGUMENT")
        with self.assertRaises(uma_c.UmaError) as device:
            self.allocator.set_device_budget(3, 8192)
        self.assertEqual(device.exception.status_name, "UMA_ERR_NO_DEVICE")

    def test_bad_arguments_are_refused_before_the_library_is_called(self):
        calls = len(self.fake.log)
        cases = [(ValueError, dict(ranges=[])), (ValueError, dict(ranges=[(self.block, 0)])),
                 (ValueError, dict(ranges=[(0, 64)])), (TypeError, dict(ranges=[self.block])),
                 (ValueError, dict(ranges=[(self.block, 64)], mode="append")),
                 (ValueError, dict(ranges=[(self.block, 64)], policy="everywhere")),
                 (ValueError, dict(ranges=[(self.block, 64)], device=-1)),
                 (TypeError, dict(ranges=[(self.block, 64)], wait_complete=1)),
                 (ValueError, dict(ranges=[(self.block, 64)], tenant="")),
                 (ValueError, dict(ranges=[(self.block, 64)], cycle_plans=1 << 32))]
        for error, kwargs in cases:
            with self.assertRaises(error, msg=str(kwargs)):
                self.allocator.will_access(**kwargs)
        with self.assertRaises(ValueError):
            self.allocator.set_device_budget(0, -1)
        self.assertEqual(len(self.fake.log), calls, "no call reached the library")

    def test_residency_report_and_json(self):
        self.allocator.set_device_budget(0, 1 << 20)
        self.allocator.will_access([(self.block, 65536)], policy="migrate")
        report = self.allocator.residency()
        self.assertEqual(report["device_count"], 1)
        self.assertEqual(report["devices"][0]["budget_bytes"], 1 << 20)
        self.assertEqual(report["devices"][0]["held_bytes"], 65536)
        self.assertEqual(set(report) - {"devices", "device_count"},
                         set(uma_c.binding.RESIDENCY_FIELDS))
        self.assertIn('"peak": 65536', self.allocator.residency_json())

    def test_a_sequence_begins_its_steps_in_a_cycle_and_close_ends_them(self):
        with self.allocator.sequence(lookahead=1) as sequence:
            first = sequence.add_step([(self.block, 4096)], policy="migrate")
            second = sequence.add_step([(self.block + 4096, 4096)], mode="write")
            sequence.begin(0)
            sequence.begin(1)
            sequence.begin(2)
            held = {r: n for r, n in self.fake.holds.items() if n}
        self.assertEqual((first, second), (0, 1))
        self.assertEqual(held, {(self.block, 4096): 1}, "step 2 is step 0 again")
        self.assertEqual(sum(self.fake.holds.values()), 0, "close finished the plans")
        self.assertTrue(sequence.closed)
        sequence.close()  # a second close does nothing


class WithoutPlanCallsTest(unittest.TestCase):
    def test_a_library_without_the_plan_calls_raises_not_supported(self):
        lib = types.SimpleNamespace(uma_last_error=lambda: b"")
        with self.assertRaises(uma_c.UmaError) as caught:
            uma_c.plans.plan_function(lib, "uma_will_access")
        self.assertEqual(caught.exception.status_name, "UMA_ERR_NOT_SUPPORTED")
        self.assertIn("predates the residency plan calls", str(caught.exception))
        self.assertFalse(uma_c.binding.has_plans(lib))


class RealPlanCallsTest(unittest.TestCase):
    """Against libuma_c.so itself, once it has the plan calls (skipped before)."""

    def setUp(self):
        _, lib = uma_c.library(library_path())
        if not uma_c.binding.has_plans(lib):
            raise unittest.SkipTest("this libuma_c.so has no plan calls yet (issue 25)")
        self.allocator = uma_c.Allocator.create(library_path(), backend="host",
                                                quota_bytes=64 * MiB, host_devices=1,
                                                host_device_bytes=256 * MiB)

    def tearDown(self):
        self.allocator.close()

    def test_options_init_sets_the_struct_size_of_the_python_layout(self):
        options = uma_c.plans.make_plan_options(self.allocator._lib)
        self.assertEqual(options.struct_size, ctypes.sizeof(uma_c.binding.PlanOptions))

    def test_a_plan_within_the_budget_is_charged_and_a_foreign_range_refused(self):
        block = self.allocator.malloc(1 * MiB)
        self.allocator.set_device_budget(0, 4 * MiB)
        moved = self.allocator.will_access([(block, 1 * MiB)], policy="migrate",
                                           wait_complete=True)
        report = self.allocator.residency()
        self.assertEqual(moved["to_device_bytes"], 1 * MiB)
        self.assertEqual(report["devices"][0]["budget_bytes"], 4 * MiB)
        self.assertEqual(report["devices"][0]["held_bytes"], 1 * MiB)
        self.allocator.done_with([(block, 1 * MiB)])
        with self.assertRaises(uma_c.UmaError) as foreign:
            self.allocator.will_access([(BOGUS, 4096)])
        self.assertEqual(foreign.exception.status_name, "UMA_ERR_UNKNOWN_POINTER")
        with self.assertRaises(uma_c.UmaError) as zero:
            self.allocator.set_device_budget(0, 0)
        self.assertEqual(zero.exception.status_name, "UMA_ERR_INVALID_ARGUMENT")
        self.allocator.set_device_budget(0, 512 * 1024)
        with self.assertRaises(uma_c.UmaMemoryError) as over:
            self.allocator.will_access([(block, 1 * MiB)], policy="migrate")
        self.assertEqual(over.exception.status_name, "UMA_ERR_QUOTA_EXCEEDED")
        self.allocator.free(block, 1 * MiB)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    unittest.main()
