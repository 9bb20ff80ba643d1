"""The ctypes binding (python/uma_c) against the real libuma_c.so on the host backend."""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

from support import PYTHON_DIR, MiB, find_stats_object, library_path, run_fresh, uma_c

BOGUS_POINTER = 0x7E5700000000  # an address uma never handed out


def host_allocator(**options):
    options.setdefault("backend", "host")
    return uma_c.Allocator.create(library_path(), **options)


class BindingLayoutTest(unittest.TestCase):
    def test_config_init_sets_a_struct_size_equal_to_the_python_layout(self):
        _, lib = uma_c.library(library_path())
        config = uma_c.make_config(lib)
        self.assertEqual(config.struct_size, ctypes.sizeof(uma_c.binding.Config))

    def test_every_status_name_matches_the_library(self):
        _, lib = uma_c.library(library_path())
        for value, name in uma_c.STATUS_NAMES.items():
            self.assertEqual(lib.uma_status_string(value).decode(), name)

    def test_stats_dict_has_every_counter_of_the_struct(self):
        with host_allocator() as allocator:
            self.assertEqual(set(allocator.stats()), set(uma_c.STATS_FIELDS))


class DeprecatedConfigNameTest(unittest.TestCase):
    """uma_config.cache_max_bytes is max_block_bytes (issue 38): the old name is taken for one
    release, with a DeprecationWarning."""

    def test_the_old_keyword_sets_max_block_bytes_and_warns(self):
        _, lib = uma_c.library(library_path())
        with self.assertWarnsRegex(DeprecationWarning, "cache_max_bytes is max_block_bytes"):
            config = uma_c.make_config(lib, cache_max_bytes=MiB)
        self.assertEqual(config.max_block_bytes, MiB)

    def test_both_names_at_once_are_refused(self):
        _, lib = uma_c.library(library_path())
        with self.assertRaisesRegex(TypeError, "give max_block_bytes only"):
            uma_c.make_config(lib, cache_max_bytes=MiB, max_block_bytes=MiB)

    def blocks_in_use_after_a_small_and_a_large_malloc(self, environment):
        """In a fresh process whose default allocator reads `environment`: the block allocator's
        blocks in use after a 4 KiB and a 2 MiB uma_malloc."""
        result, _ = run_fresh(f"""
            import json, os, uma_c
            os.environ.update({environment!r})
            a = uma_c.Allocator.default({library_path()!r})
            small, large = a.malloc(4096), a.malloc(2 << 20)
            print(json.dumps(dict(blocks=a.stats()["cache_blocks_in_use"])))
            """)
        return result["blocks"]

    def test_the_old_environment_variable_still_sets_the_block_limit(self):
        base = {"UMA_BACKEND": "host"}
        self.assertEqual(self.blocks_in_use_after_a_small_and_a_large_malloc(
            dict(base, UMA_CACHE_MAX_BYTES=str(MiB))), 1, "2 MiB is past the 1 MiB limit")
        self.assertEqual(self.blocks_in_use_after_a_small_and_a_large_malloc(
            dict(base, UMA_MAX_BLOCK_BYTES=str(MiB))), 1, "the new name")
        self.assertEqual(self.blocks_in_use_after_a_small_and_a_large_malloc(
            dict(base, UMA_MAX_BLOCK_BYTES=str(4 * MiB), UMA_CACHE_MAX_BYTES=str(MiB))), 2,
            "the new name wins over the old")

    def test_the_struct_field_answers_to_its_old_name_with_a_warning(self):
        config = uma_c.binding.Config()
        with self.assertWarns(DeprecationWarning):
            config.cache_max_bytes = 2 * MiB
        self.assertEqual(config.max_block_bytes, 2 * MiB)
        with self.assertWarns(DeprecationWarning):
            self.assertEqual(config.cache_max_bytes, 2 * MiB)


class MallocFreeTest(unittest.TestCase):
    def test_blocks_from_several_threads_are_counted_and_all_come_back(self):
        threads, per_thread = 8, 64
        sizes = [256 * (1 + (i % 7)) * (1 + i % 3) for i in range(per_thread)]
        with host_allocator(quota_bytes=256 * MiB) as allocator:
            held = [None] * threads
            barrier = threading.Barrier(threads + 1)
            errors = []

            def worker(index):
                try:
                    stream = 0x1000 + index  # a stream token per thread (host backend)
                    held[index] = [(allocator.malloc(s, 0, stream), s) for s in sizes]
                    barrier.wait()
                    barrier.wait()
                    for ptr, size in held[index]:
                        allocator.free(ptr, size, 0, stream)
                except Exception as error:  # reported below, the barrier must not hang
                    errors.append(error)
                    barrier.abort()

            pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
            for thread in pool:
                thread.start()
            barrier.wait(timeout=60)
            during = allocator.stats()
            pointers = [ptr for blocks in held for ptr, _ in blocks]
            barrier.wait(timeout=60)
            for thread in pool:
                thread.join(60)
            self.assertEqual(errors, [])
            after = allocator.stats()
        requested = threads * sum(sizes)
        self.assertEqual(len(set(pointers)), threads * per_thread, "every block is distinct")
        self.assertNotIn(0, pointers)
        self.assertEqual(during["cache_requested_bytes"], requested)
        self.assertEqual(during["cache_blocks_in_use"], threads * per_thread)
        self.assertGreaterEqual(during["cache_in_use_bytes"], requested)
        self.assertGreaterEqual(during["live_bytes"], during["cache_in_use_bytes"])
        self.assertEqual(during["cache_hits"] + during["cache_misses"], threads * per_thread)
        for counter in ("cache_in_use_bytes", "cache_requested_bytes", "cache_blocks_in_use"):
            self.assertEqual(after[counter], 0, counter)

    def test_a_block_is_writable_over_its_whole_size(self):
        with host_allocator() as allocator:
            ptr = allocator.malloc(65536)
            ctypes.memset(ptr, 0xAB, 65536)
            self.assertEqual(ctypes.string_at(ptr + 65535, 1), b"\xab")
            allocator.free(ptr, 65536)

    def test_size_zero_gives_null_and_nothing_is_counted(self):
        with host_allocator() as allocator:
            before = allocator.stats()["cache_in_use_bytes"]
            self.assertEqual(allocator.malloc(0), 0)
            self.assertEqual(allocator.stats()["cache_in_use_bytes"], before)

    def test_trim_gives_back_the_idle_leases_but_not_one_with_a_block_out(self):
        with host_allocator(quota_bytes=64 * MiB, policy="direct") as allocator:
            kept = allocator.malloc(4096)
            freed = allocator.malloc(65536)
            allocator.free(freed, 65536)
            before = allocator.stats()
            released = allocator.trim()
            after = allocator.stats()
            allocator.free(kept, 4096)
            self.assertGreater(released, 0)
            self.assertEqual(after["live_bytes"], before["live_bytes"] - released)
            self.assertEqual(after["cache_in_use_bytes"], before["cache_in_use_bytes"])
            self.assertEqual(allocator.trim(), after["live_bytes"], "now the last lease is idle")
            self.assertEqual(allocator.stats()["live_bytes"], 0)

    def test_stats_json_agrees_with_the_struct(self):
        with host_allocator(quota_bytes=64 * MiB) as allocator:
            ptrs = [allocator.malloc(size) for size in (4096, 65536, 3 * MiB)]
            struct = allocator.stats()
            document = find_stats_object(json.loads(allocator.stats_json()))
            for ptr, size in zip(ptrs, (4096, 65536, 3 * MiB)):
                allocator.free(ptr, size)
        self.assertIsNotNone(document, "the JSON has an object with live_bytes")
        # Every counter of the struct is in the JSON: the caching layer's under "cache". A
        # library older than the tiers (issue 39) has none of theirs, in the struct or the JSON.
        with_tiers = uma_c.binding.has_tiers(uma_c.library(library_path())[1])
        for key in uma_c.STATS_FIELDS:
            if key in uma_c.TIER_STATS_FIELDS and not with_tiers:
                self.assertEqual(struct[key], 0, key)
                continue
            if key.startswith("cache_"):
                self.assertEqual(document["cache"][key[len("cache_"):]], struct[key], key)
            else:
                self.assertEqual(document[key], struct[key], key)
        self.assertEqual(struct["quota_bytes"], 64 * MiB)
        self.assertEqual(struct["cache_requested_bytes"], 4096 + 65536 + 3 * MiB)


class ErrorTest(unittest.TestCase):
    def assertStatus(self, context, name):
        error = context.exception
        self.assertEqual(error.status_name, name)
        self.assertEqual(error.status, uma_c.STATUS[name])
        self.assertTrue(error.message, "uma_last_error() explains the failure")
        self.assertIn(name, str(error))

    def test_a_request_over_the_quota_raises_quota_exceeded_and_changes_nothing(self):
        with host_allocator(quota_bytes=4 * MiB, policy="direct") as allocator:
            before = allocator.stats()
            with self.assertRaises(uma_c.UmaMemoryError) as context:
                allocator.malloc(16 * MiB)
            self.assertStatus(context, "UMA_ERR_QUOTA_EXCEEDED")
            self.assertIsInstance(context.exception, MemoryError)
            after = allocator.stats()
        self.assertEqual(after["live_bytes"], before["live_bytes"])
        self.assertEqual(after["cache_in_use_bytes"], before["cache_in_use_bytes"])

    def test_freeing_a_pointer_uma_never_handed_out_raises_unknown_pointer(self):
        with host_allocator() as allocator:
            with self.assertRaises(uma_c.UmaError) as context:
                allocator.free(BOGUS_POINTER, 64)
            self.assertStatus(context, "UMA_ERR_UNKNOWN_POINTER")

    def test_the_unchecked_calls_still_raise_on_a_failing_status(self):
        with host_allocator(quota_bytes=4 * MiB, policy="direct") as allocator:
            malloc, free = allocator.unchecked_calls()
            ptr = malloc(4096, 0, 0x77)
            free(ptr, 4096, 0, 0x77)
            with self.assertRaises(uma_c.UmaError) as context:
                free(ptr, 4096, 0, 0x77)
            self.assertStatus(context, "UMA_ERR_UNKNOWN_POINTER")
            with self.assertRaises(uma_c.UmaMemoryError) as context:
                malloc(16 * MiB, 0, 0x77)
            self.assertStatus(context, "UMA_ERR_QUOTA_EXCEEDED")

    def test_a_double_free_raises_unknown_pointer(self):
        with host_allocator() as allocator:
            ptr = allocator.malloc(4096)
            allocator.free(ptr, 4096)
            with self.assertRaises(uma_c.UmaError) as context:
                allocator.free(ptr, 4096)
            self.assertStatus(context, "UMA_ERR_UNKNOWN_POINTER")

    def test_range_operations_on_an_unknown_pointer_raise_unknown_pointer(self):
        with host_allocator() as allocator:
            for call in (lambda: allocator.prefetch(BOGUS_POINTER, 64, uma_c.DEVICE_HOST),
                         lambda: allocator.discard(BOGUS_POINTER, 64)):
                with self.assertRaises(uma_c.UmaError) as context:
                    call()
                self.assertStatus(context, "UMA_ERR_UNKNOWN_POINTER")

    def test_a_wrong_size_at_free_is_refused_and_the_block_stays_live(self):
        with host_allocator() as allocator:
            ptr = allocator.malloc(4096)
            with self.assertRaises(uma_c.UmaError) as context:
                allocator.free(ptr, 8192)
            self.assertStatus(context, "UMA_ERR_INVALID_ARGUMENT")
            self.assertGreaterEqual(allocator.stats()["cache_in_use_bytes"], 4096)
            allocator.free(ptr, 4096)
            self.assertEqual(allocator.stats()["cache_in_use_bytes"], 0)

    def test_a_quota_below_what_is_held_is_refused(self):
        with host_allocator(quota_bytes=64 * MiB) as allocator:
            ptr = allocator.malloc(2 * MiB)
            with self.assertRaises(uma_c.UmaError) as context:
                allocator.set_quota(1024)
            self.assertStatus(context, "UMA_ERR_INVALID_ARGUMENT")
            self.assertEqual(allocator.quota(), 64 * MiB)
            allocator.set_quota(128 * MiB)
            self.assertEqual(allocator.quota(), 128 * MiB)
            allocator.free(ptr, 2 * MiB)

    def test_bad_python_arguments_are_refused_before_the_library_is_called(self):
        with host_allocator() as allocator:
            before = allocator.stats()
            for call, kind in ((lambda: allocator.malloc(-1), ValueError),
                               (lambda: allocator.malloc(1.5), ValueError),
                               (lambda: allocator.malloc(64, device=-2), ValueError),
                               (lambda: allocator.free("0x10"), TypeError),
                               (lambda: allocator.advise(0, 1, "read_mostly", 0), ValueError),
                               (lambda: allocator.set_quota(-5), ValueError)):
                with self.assertRaises(kind):
                    call()
            self.assertEqual(allocator.stats()["allocations"], before["allocations"])

    def test_unknown_config_options_and_values_are_refused(self):
        with self.assertRaisesRegex(TypeError, "quota_byte"):
            host_allocator(quota_byte=1)
        with self.assertRaisesRegex(ValueError, "policy='pooled'"):
            host_allocator(policy="pooled")
        with self.assertRaisesRegex(ValueError, "quota_bytes"):
            host_allocator(quota_bytes=1 << 64)

    def test_a_closed_allocator_refuses_calls_instead_of_using_a_freed_handle(self):
        allocator = host_allocator()
        allocator.close()
        with self.assertRaisesRegex(ValueError, "closed"):
            allocator.malloc(64)
        self.assertIsNone(allocator.close(), "a second close is a no-op")

    def test_close_reports_blocks_still_out_as_leaked_not_freed(self):
        allocator = host_allocator()
        kept = allocator.malloc(65536)
        given_back = allocator.malloc(4096)
        allocator.free(given_back, 4096)
        report = allocator.close()
        self.assertEqual(set(report), set(uma_c.STOP_REPORT_FIELDS))
        self.assertEqual(report["blocks_outstanding"], 1, report)
        self.assertGreaterEqual(report["bytes_leaked"], 65536, report)
        self.assertNotEqual(kept, 0)

    def test_a_missing_library_is_named_in_the_error(self):
        with self.assertRaisesRegex(uma_c.LibraryNotFound, "/nonexistent/libuma_c.so"):
            uma_c.library("/nonexistent/libuma_c.so")


class FreeFindsTheDeviceTest(unittest.TestCase):
    """free without device= gives a block back on the device malloc named (issue 36: it used to
    name device 0, and uma_free refused a device-1 block)."""

    def assertStatus(self, context, name):
        self.assertEqual(context.exception.status_name, name, str(context.exception))

    def test_a_device_1_block_is_freed_without_naming_its_device(self):
        with host_allocator(host_devices=2) as allocator:
            on_1 = allocator.malloc(4096, device=1)
            on_0 = allocator.malloc(4096)
            allocator.free(on_1, 4096)
            allocator.free(on_0, 4096)
            self.assertEqual(allocator.stats()["cache_in_use_bytes"], 0)

    def test_a_wrong_device_named_is_refused_and_the_block_stays_live(self):
        with host_allocator(host_devices=2) as allocator:
            ptr = allocator.malloc(4096, device=1)
            with self.assertRaises(uma_c.UmaError) as context:
                allocator.free(ptr, 4096, device=0)
            self.assertStatus(context, "UMA_ERR_INVALID_ARGUMENT")
            self.assertGreaterEqual(allocator.stats()["cache_in_use_bytes"], 4096)
            allocator.free(ptr, 4096)  # the refused free kept what malloc was told
            self.assertEqual(allocator.stats()["cache_in_use_bytes"], 0)

    def test_a_block_freed_twice_is_refused_the_second_time_on_any_device(self):
        with host_allocator(host_devices=2) as allocator:
            ptr = allocator.malloc(4096, device=1)
            allocator.free(ptr, 4096)
            with self.assertRaises(uma_c.UmaError) as context:
                allocator.free(ptr, 4096)
            self.assertStatus(context, "UMA_ERR_UNKNOWN_POINTER")


class InstalledLibrarySearchTest(unittest.TestCase):
    """uma_c as `cmake --install` lays it out: <prefix>/lib/python3/dist-packages/uma_c with an
    _installed.py naming <prefix>/lib relative to the package (cmake/uma_python_install.cmake)."""

    def setUp(self):
        self.prefix = tempfile.mkdtemp(prefix="uma_installed_")
        self.addCleanup(shutil.rmtree, self.prefix)
        self.packages = os.path.join(self.prefix, "lib", "python3", "dist-packages")
        shutil.copytree(os.path.join(PYTHON_DIR, "uma_c"), os.path.join(self.packages, "uma_c"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        with open(os.path.join(self.packages, "uma_c", "_installed.py"), "w") as out:
            out.write('LIBRARY_DIR = "../../.."\n')
        self.installed = os.path.join(self.prefix, "lib", "libuma_c.so")
        self.elsewhere = os.path.join(self.prefix, "elsewhere", "libuma_c.so")
        os.makedirs(os.path.dirname(self.elsewhere))
        for link in (self.installed, self.elsewhere):
            os.symlink(os.path.abspath(library_path()), link)

    def found(self, **env):
        """find_library() in a fresh interpreter that sees only the copied package, with `env`
        (None: unset) over this process's environment; it also opens an allocator there."""
        child_env = dict(os.environ, PYTHONPATH=self.packages, PYTHONDONTWRITEBYTECODE="1")
        for name, value in env.items():
            child_env.pop(name, None)
            if value is not None:
                child_env[name] = value
        code = ("import uma_c\n"
                "uma_c.Allocator.create(backend='host').close()\n"
                "print(uma_c.find_library())")
        done = subprocess.run([sys.executable, "-c", code], env=child_env, cwd=self.prefix,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout.strip()

    def test_the_install_libdir_is_found_without_any_variable(self):
        self.assertEqual(self.found(UMA_LIBRARY=None, LD_LIBRARY_PATH=None), self.installed)

    def test_the_install_libdir_comes_before_ld_library_path(self):
        found = self.found(UMA_LIBRARY=None, LD_LIBRARY_PATH=os.path.dirname(self.elsewhere))
        self.assertEqual(found, self.installed)

    def test_uma_library_comes_before_the_install_libdir(self):
        self.assertEqual(self.found(UMA_LIBRARY=self.elsewhere), self.elsewhere)

    def test_the_soname_file_alone_is_found_as_the_runtime_package_lays_it_out(self):
        # libuma-c holds libuma_c.so.1 (and the file it links to); libuma_c.so is libuma-dev's.
        soname = self.installed + f".{uma_c.ABI_VERSION}"
        os.rename(self.installed, soname)
        self.assertEqual(self.found(UMA_LIBRARY=None, LD_LIBRARY_PATH=None), soname)

    def test_the_soname_file_comes_before_the_link_in_one_folder(self):
        soname = self.installed + f".{uma_c.ABI_VERSION}"
        os.symlink(os.path.abspath(library_path()), soname)
        self.assertEqual(self.found(UMA_LIBRARY=None, LD_LIBRARY_PATH=None), soname)

    def test_without_an_install_note_ld_library_path_is_searched(self):
        os.remove(os.path.join(self.packages, "uma_c", "_installed.py"))
        found = self.found(UMA_LIBRARY=None, LD_LIBRARY_PATH=os.path.dirname(self.elsewhere))
        self.assertEqual(found, self.elsewhere)


class DefaultAllocatorTest(unittest.TestCase):
    def test_the_default_allocator_is_one_per_process_and_refuses_other_options(self):
        result, _ = run_fresh(f"""
            import json, uma_c
            path = {library_path()!r}
            a = uma_c.Allocator.default(path, backend="host", quota_bytes=32 << 20)
            b = uma_c.Allocator.default(path, backend="host", quota_bytes=32 << 20)
            try:
                uma_c.Allocator.default(path, backend="host", quota_bytes=64 << 20)
                other = "accepted"
            except uma_c.UmaError as error:
                other = error.status_name
            try:
                a.close()
                closed = "closed"
            except ValueError:
                closed = "refused"
            print(json.dumps(dict(same=a._handle == b._handle, quota=a.quota(), other=other,
                                  closed=closed)))
            """)
        self.assertEqual(result, dict(same=True, quota=32 * MiB, other="UMA_ERR_INVALID_ARGUMENT",
                                      closed="refused"))


if __name__ == "__main__":
    unittest.main()
