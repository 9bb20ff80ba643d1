"""The binding's tiers and copies (python/uma_c/tiers.py, issue 39): the struct layouts against
actors/c/uma.h, what reaches the C functions (through the stand-in tier calls of
fakes/uma_fake_tiers.py, which decode the ctypes arguments), errors as uma_c errors, bad
arguments refused before the library is called; and, where libuma_c.so has the tiers, the same
calls against it on the host backend (skipped before)."""

import ctypes
import os
import re
import sys
import types
import unittest

from support import FAKES_DIR, HERE, MiB, library_path, uma_c

sys.path.insert(0, FAKES_DIR)
import uma_fake_tiers  # noqa: E402

HEADER = os.path.normpath(os.path.join(HERE, "..", "..", "actors", "c", "uma.h"))
BOGUS = 0x7E5700000000
C_TYPES = {"uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64, "double": ctypes.c_double,
           "int": ctypes.c_int}


def header_members(struct):
    """[(name, ctypes type)] of `typedef struct <struct> {...}` in uma.h, in order (arrays as
    ctypes arrays, uma_device_residency as the binding's DeviceResidency)."""
    with open(HEADER) as header:
        text = re.sub(r"/\*.*?\*/", "", header.read(), flags=re.S)
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (struct, struct), text, re.S).group(1)
    types_ = dict(C_TYPES, uma_device_residency=uma_c.binding.DeviceResidency)
    members = []
    for declaration in filter(None, (d.strip() for d in body.split(";"))):
        kind, names = declaration.split(None, 1)
        for name in (n.strip() for n in names.split(",")):
            array = re.fullmatch(r"(\w+)\[(\w+)\]", name)
            if array:
                members.append((array.group(1), types_[kind] * int(array.group(2))))
            else:
                members.append((name, types_[kind]))
    return members


def python_members(structure):
    return [(name, kind) for name, kind in structure._fields_]


def same_members(header, python):
    """Whether two member lists agree: names in order, and types (arrays by element and
    length)."""
    def key(kind):
        if hasattr(kind, "_length_"):
            return (kind._type_, kind._length_)
        return kind
    return [(n, key(k)) for n, k in header] == [(n, key(k)) for n, k in python]


class LayoutTest(unittest.TestCase):
    def test_uma_stats_has_the_headers_members_in_its_order_and_types(self):
        header = header_members("uma_stats")
        self.assertTrue(same_members(header, python_members(uma_c.binding.Stats)),
                        f"uma.h: {header}")
        self.assertEqual([n for n, _ in header[-6:]], list(uma_c.TIER_STATS_FIELDS))

    def test_uma_residency_report_has_the_headers_members_in_its_order_and_types(self):
        header = header_members("uma_residency_report")
        self.assertTrue(same_members(header, python_members(uma_c.binding.ResidencyReport)),
                        f"uma.h: {header}")
        self.assertTrue(same_members(header_members("uma_device_residency"),
                                     python_members(uma_c.binding.DeviceResidency)))

    def test_the_library_fills_the_whole_python_structs(self):
        """The library writes min(struct_size, its own size) and says how much: with room to
        spare, what it says is the size of its struct."""
        _, lib = uma_c.library(library_path())
        if not uma_c.binding.has_tiers(lib):
            self.skipTest("this libuma_c.so has no tiers yet (issue 39): its structs are shorter")
        with uma_c.Allocator.create(library_path(), backend="host") as allocator:
            for structure, call in ((uma_c.binding.Stats, lib.uma_get_stats),
                                    (uma_c.binding.ResidencyReport, lib.uma_get_residency)):
                room = ctypes.create_string_buffer(ctypes.sizeof(structure) + 64)
                out = structure.from_buffer(room)
                out.struct_size = len(room)
                self.assertEqual(call(allocator._handle, ctypes.byref(out)), 0)
                self.assertEqual(out.struct_size, ctypes.sizeof(structure), structure.__name__)


class FakeTierCallsTest(unittest.TestCase):
    def setUp(self):
        _, self.real = uma_c.library(library_path())
        self.fake = uma_fake_tiers.FakeTiers(self.real)
        self.allocator = uma_c.Allocator.create(library_path(), backend="host",
                                                quota_bytes=64 * MiB)
        self.allocator._lib = self.fake  # the tier calls go to the stand-in

    def tearDown(self):
        self.allocator._lib = self.real
        self.allocator.close()

    def test_memory_comes_back_as_addresses_and_a_copy_moves_the_bytes(self):
        host = self.allocator.host_alloc(4096)
        device = self.allocator.device_alloc(8192, device=0)
        ctypes.memmove(host, b"uma tiers" * 100, 900)
        self.allocator.copy(device + 256, host, 900, stream=0x5001)
        self.assertEqual(ctypes.string_at(device + 256, 900), b"uma tiers" * 100)
        self.assertEqual(self.fake.log, [("host_alloc", 4096), ("device_alloc", 8192, 0),
                                         ("uma_copy", device + 256, host, 900, 0x5001)])
        stats = self.allocator.stats()
        self.assertEqual({k: stats[k] for k in uma_c.TIER_STATS_FIELDS}, {
            "host_tier_bytes": 4096, "device_tier_bytes": 8192, "copy_to_device_bytes": 900,
            "copy_to_host_bytes": 0, "copy_other_bytes": 0, "copies": 1})
        self.allocator.tier_free(host)
        self.allocator.tier_free(device)
        self.assertEqual(self.allocator.stats()["host_tier_bytes"], 0)

    def test_a_stream_is_an_address_an_object_with_cuda_stream_or_the_default(self):
        host, device = self.allocator.host_alloc(64), self.allocator.device_alloc(64)
        self.allocator.copy(device, host, 64, stream=types.SimpleNamespace(cuda_stream=0xBEEF))
        self.allocator.copy(device, host, 64, stream=types.SimpleNamespace(ptr=0xCAFE))
        self.allocator.copy(device, host, 64)
        self.allocator.copy(device, host, 64, stream=0)
        self.assertEqual([e[4] for e in self.fake.log if e[0] == "uma_copy"],
                         [0xBEEF, 0xCAFE, 0, 0])

    def test_failures_raise_uma_errors_with_the_status_and_the_message(self):
        with self.assertRaises(uma_c.UmaError) as unknown:
            self.allocator.tier_free(BOGUS)
        self.assertEqual(unknown.exception.status_name, "UMA_ERR_UNKNOWN_POINTER")
        self.assertIn("no tier block", unknown.exception.message)
        self.fake.fail["uma_device_alloc"] = (2, "the budget is full")
        with self.assertRaises(uma_c.UmaMemoryError) as over:
            self.allocator.device_alloc(4096)
        self.assertEqual(over.exception.status_name, "UMA_ERR_QUOTA_EXCEEDED")
        self.assertEqual(over.exception.message, "the budget is full")
        host = self.allocator.host_alloc(100)
        with self.assertRaises(uma_c.UmaError) as past:
            self.allocator.copy(host, host + 50, 200)
        self.assertEqual(past.exception.status_name, "UMA_ERR_INVALID_ARGUMENT")

    def test_bad_arguments_are_refused_before_the_library_is_called(self):
        host = self.allocator.host_alloc(64)
        calls = len(self.fake.log)
        for call, kind in ((lambda: self.allocator.host_alloc(-1), ValueError),
                           (lambda: self.allocator.host_alloc(1.5), ValueError),
                           (lambda: self.allocator.device_alloc(64, device=-1), ValueError),
                           (lambda: self.allocator.device_alloc(64, device=True), ValueError),
                           (lambda: self.allocator.tier_free(0), TypeError),
                           (lambda: self.allocator.tier_free("0x10"), TypeError),
                           (lambda: self.allocator.copy(host, 0, 64), TypeError),
                           (lambda: self.allocator.copy(host, host, -1), ValueError),
                           (lambda: self.allocator.copy(host, host, 8, stream="s"), TypeError),
                           (lambda: self.allocator.copy(host, host, 8, stream=-1), TypeError)):
            with self.assertRaises(kind):
                call()
        self.assertEqual(len(self.fake.log), calls, "no call reached the library")

    def test_the_residency_report_has_the_copies_each_way(self):
        _, lib = uma_c.library(library_path())
        if not uma_c.binding.has_plans(lib):
            self.skipTest("this libuma_c.so has no residency report (issue 25)")
        host, device = self.allocator.host_alloc(4096), self.allocator.device_alloc(4096)
        self.allocator.copy(device, host, 4096)
        self.allocator.copy(host, device, 1000)
        report = self.allocator.residency()
        self.assertEqual((report["copy_to_device_bytes"], report["copy_to_host_bytes"]),
                         (4096, 1000))


class WithoutTierCallsTest(unittest.TestCase):
    def test_a_library_without_the_tiers_raises_not_supported(self):
        lib = types.SimpleNamespace(uma_last_error=lambda: b"")
        with self.assertRaises(uma_c.UmaError) as caught:
            uma_c.tiers.tier_function(lib, "uma_copy")
        self.assertEqual(caught.exception.status_name, "UMA_ERR_NOT_SUPPORTED")
        self.assertIn("predates the host tier", str(caught.exception))
        self.assertFalse(uma_c.binding.has_tiers(lib))

    def test_an_older_library_loads_and_reports_no_tier_counters(self):
        with uma_c.Allocator.create(library_path(), backend="host") as allocator:
            if allocator.has_tiers():
                self.skipTest("this libuma_c.so has the tiers")
            self.assertEqual({allocator.stats()[k] for k in uma_c.TIER_STATS_FIELDS}, {0})
            with self.assertRaises(uma_c.UmaError) as caught:
                allocator.host_alloc(4096)
            self.assertEqual(caught.exception.status_name, "UMA_ERR_NOT_SUPPORTED")


class RealTierCallsTest(unittest.TestCase):
    """Against libuma_c.so itself (host backend: the tiers are system memory, a copy a memcpy
    done before it returns), once it has the tiers (skipped before)."""

    def setUp(self):
        _, lib = uma_c.library(library_path())
        if not uma_c.binding.has_tiers(lib):
            raise unittest.SkipTest("this libuma_c.so has no tiers yet (issue 39: "
                                    "uma_host_alloc, uma_device_alloc, uma_tier_free, uma_copy)")
        self.allocator = uma_c.Allocator.create(library_path(), backend="host",
                                                quota_bytes=64 * MiB, host_devices=1,
                                                host_device_bytes=256 * MiB)

    def tearDown(self):
        self.allocator.close()

    def test_bytes_go_host_to_device_and_back_and_are_counted_by_direction(self):
        host, device = self.allocator.host_alloc(1 * MiB), self.allocator.device_alloc(1 * MiB)
        back = self.allocator.host_alloc(1 * MiB)
        payload = bytes(range(256)) * 4096
        ctypes.memmove(host, payload, len(payload))
        before = self.allocator.stats()
        self.allocator.copy(device, host, len(payload))
        self.allocator.copy(back, device, len(payload), stream=0)
        after = self.allocator.stats()
        self.assertEqual(ctypes.string_at(back, len(payload)), payload)
        self.assertEqual(after["copy_to_device_bytes"] - before["copy_to_device_bytes"], 1 * MiB)
        self.assertEqual(after["copy_to_host_bytes"] - before["copy_to_host_bytes"], 1 * MiB)
        self.assertEqual(after["copies"] - before["copies"], 2)
        self.assertGreaterEqual(after["host_tier_bytes"], 2 * MiB)
        self.assertGreaterEqual(after["device_tier_bytes"], 1 * MiB)
        report = self.allocator.residency()
        self.assertGreaterEqual(report["copy_to_device_bytes"], 1 * MiB)
        for ptr in (host, device, back):
            self.allocator.tier_free(ptr)
        after_free = self.allocator.stats()
        self.assertEqual((after_free["host_tier_bytes"], after_free["device_tier_bytes"]), (0, 0))

    def test_device_memory_is_charged_to_the_budget_and_refused_over_it(self):
        self.allocator.set_device_budget(0, 4 * MiB)
        device = self.allocator.device_alloc(3 * MiB)
        self.assertGreaterEqual(self.allocator.residency()["devices"][0]["resident_bytes"],
                                3 * MiB)
        with self.assertRaises(uma_c.UmaMemoryError) as over:
            self.allocator.device_alloc(2 * MiB)
        self.assertEqual(over.exception.status_name, "UMA_ERR_QUOTA_EXCEEDED")
        self.allocator.tier_free(device)
        self.allocator.tier_free(self.allocator.device_alloc(2 * MiB))

    def test_unknown_and_freed_pointers_are_refused(self):
        host = self.allocator.host_alloc(4096)
        with self.assertRaises(uma_c.UmaError) as unknown:
            self.allocator.copy(host, BOGUS, 64)
        self.assertEqual(unknown.exception.status_name, "UMA_ERR_UNKNOWN_POINTER")
        self.allocator.tier_free(host)
        with self.assertRaises(uma_c.UmaError) as twice:
            self.allocator.tier_free(host)
        self.assertEqual(twice.exception.status_name, "UMA_ERR_UNKNOWN_POINTER")

    def test_a_managed_block_and_the_host_tier_copy_both_ways(self):
        block = self.allocator.malloc(65536)
        host = self.allocator.host_alloc(65536)
        ctypes.memset(block, 0x5A, 65536)
        self.allocator.copy(host, block, 65536)
        self.assertEqual(ctypes.string_at(host + 65535, 1), b"\x5a")
        self.allocator.tier_free(host)
        self.allocator.free(block, 65536)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    unittest.main()
