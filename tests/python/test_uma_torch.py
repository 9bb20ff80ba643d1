"""uma_torch.install() without a GPU: PyTorch missing, and a stand-in torch (fakes/torch) that
records what install() asks of it and resolves the hooks from the real libuma_c.so."""

import os
import textwrap
import unittest

from support import MiB, library_path, run_fresh

PRELUDE = """
    import json, os, sys, ctypes
    import uma_c, uma_torch
    path = os.environ["UMA_LIBRARY"]
"""


def fresh(code, fakes=True, **env):
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        return run_fresh(textwrap.dedent(PRELUDE) + textwrap.dedent(code), fakes=fakes)[0]
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class WithoutTorchTest(unittest.TestCase):
    def test_install_refuses_clearly_when_torch_is_missing(self):
        library_path()
        result = fresh("""
            sys.modules["torch"] = None  # import torch raises ImportError, as where absent
            try:
                uma_torch.install(backend="host")
                outcome = "installed"
            except uma_torch.InstallError as error:
                outcome = str(error)
            print(json.dumps(dict(outcome=outcome, installed=uma_torch.is_installed())))
            """, fakes=False)
        self.assertIn("PyTorch is not importable", result["outcome"])
        self.assertFalse(result["installed"])


class WithFakeTorchTest(unittest.TestCase):
    def test_install_hands_pytorch_the_library_path_and_both_hooks(self):
        result = fresh("""
            import torch.cuda.memory as m
            allocator = uma_torch.install(backend="host", quota_bytes=48 << 20)
            first = m.calls[0]
            # PyTorch's side: allocate and free through the resolved hooks.
            before = uma_torch.stats()["cache_in_use_bytes"]
            ptr = m.current.malloc(65536, 0, None)
            during = uma_torch.stats()["cache_in_use_bytes"]
            m.current.free(ptr, 65536, 0, None)
            after = uma_torch.stats()["cache_in_use_bytes"]
            swap = [c for c in m.calls if c[0] == "change_current_allocator"][0]
            print(json.dumps(dict(
                call=list(first), path=path, swapped=swap[1] is m.current,
                installed=uma_torch.is_installed(), quota=uma_torch.quota(),
                ptr=bool(ptr), before=before, during=during, after=after,
                same=uma_torch.install(backend="host", quota_bytes=48 << 20) is allocator)))
            """, UMA_LIBRARY=library_path())
        self.assertEqual(result["call"], ["CUDAPluggableAllocator", os.path.abspath(result["path"]),
                                          "uma_torch_malloc", "uma_torch_free"])
        self.assertTrue(result["swapped"])
        self.assertTrue(result["installed"])
        self.assertEqual(result["quota"], 48 * MiB, "install's options configured the allocator")
        self.assertTrue(result["ptr"], "uma_torch_malloc served the default allocator")
        self.assertGreaterEqual(result["during"] - result["before"], 65536)
        self.assertEqual(result["after"], result["before"])
        self.assertTrue(result["same"], "a second install with the same options is a no-op")

    def test_empty_cache_gives_the_idle_cache_back_through_the_reset_hook(self):
        result = fresh("""
            import torch
            import torch.cuda.memory as m
            uma_torch.install(backend="host", policy="pool")
            ptr = m.current.malloc(3 << 20, 0, None)
            m.current.free(ptr, 3 << 20, 0, None)
            idle = uma_torch.stats()["live_bytes"]
            torch.cuda.empty_cache()
            print(json.dumps(dict(hooked=[c[0] for c in m.calls], idle=idle,
                                  after=uma_torch.stats()["live_bytes"],
                                  again=uma_torch.trim())))
            """, UMA_LIBRARY=library_path())
        self.assertIn("set_reset_fn", result["hooked"])
        self.assertGreaterEqual(result["idle"], 3 << 20, "the freed block stays cached")
        self.assertEqual(result["after"], 0, "empty_cache gave the idle lease and slab back")
        self.assertEqual(result["again"], 0, "nothing idle is left to trim")

    def test_install_refuses_once_cuda_was_initialised_and_changes_nothing(self):
        result = fresh("""
            import torch.cuda.memory as m
            try:
                uma_torch.install(backend="host", quota_bytes=16 << 20)
                outcome = "installed"
            except uma_torch.InstallError as error:
                outcome = str(error)
            # Nothing was created: the default allocator can still be made with other options.
            other = uma_c.Allocator.default(path, backend="host", quota_bytes=8 << 20).quota()
            print(json.dumps(dict(outcome=outcome, calls=len(m.calls), other=other,
                                  installed=uma_torch.is_installed())))
            """, UMA_LIBRARY=library_path(), FAKE_TORCH_CUDA_INITIALIZED="1")
        self.assertIn("CUDA is already initialised", result["outcome"])
        self.assertEqual(result["calls"], 0, "PyTorch was not asked for anything")
        self.assertEqual(result["other"], 8 * MiB)
        self.assertFalse(result["installed"])

    def test_a_refused_swap_is_reported_as_an_install_error(self):
        result = fresh("""
            try:
                uma_torch.install(backend="host")
                outcome = "installed"
            except uma_torch.InstallError as error:
                outcome = str(error)
            print(json.dumps(dict(outcome=outcome, installed=uma_torch.is_installed())))
            """, UMA_LIBRARY=library_path(), FAKE_TORCH_REFUSE_SWAP="1")
        self.assertIn("PyTorch refused the allocator", result["outcome"])
        self.assertIn("already initialized allocator", result["outcome"])
        self.assertFalse(result["installed"])

    def test_bad_options_and_a_second_install_with_other_options_are_refused(self):
        result = fresh("""
            outcomes = []
            for options in (dict(quota_bytes=-1), dict(backnd="host")):
                try:
                    uma_torch.install(**options)
                    outcomes.append("installed")
                except (TypeError, ValueError) as error:
                    outcomes.append(type(error).__name__)
            import torch.cuda.memory as m
            calls_after_bad = len(m.calls)
            uma_torch.install(backend="host", quota_bytes=16 << 20)
            try:
                uma_torch.install(backend="host", quota_bytes=32 << 20)
                outcomes.append("reinstalled")
            except uma_torch.InstallError as error:
                outcomes.append("InstallError")
            print(json.dumps(dict(outcomes=outcomes, calls_after_bad=calls_after_bad,
                                  quota=uma_torch.quota())))
            """, UMA_LIBRARY=library_path())
        self.assertEqual(result["outcomes"], ["ValueError", "TypeError", "InstallError"])
        self.assertEqual(result["calls_after_bad"], 0)
        self.assertEqual(result["quota"], 16 * MiB)

    def test_tensor_operations_refuse_before_install_and_for_a_host_tensor(self):
        result = fresh("""
            class HostTensor:
                is_cuda = False
                device = "cpu"
            outcomes = []
            try:
                uma_torch.stats()
            except uma_torch.InstallError:
                outcomes.append("InstallError")
            uma_torch.install(backend="host")
            try:
                uma_torch.prefetch(HostTensor(), device=0)
            except ValueError as error:
                outcomes.append("cpu" in str(error))
            print(json.dumps(dict(outcomes=outcomes)))
            """, UMA_LIBRARY=library_path())
        self.assertEqual(result["outcomes"], ["InstallError", True])


if __name__ == "__main__":
    unittest.main()
