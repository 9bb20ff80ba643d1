"""Joining a serving node's arbiter from Python (python/uma_c/arbiter.py, uma_torch.join_arbiter)
on the host backend: bad arguments refused before the library is called, then members against a
`uma serve --arbiter-total` child (UMA_CLI: the built tool; CTest sets it): budgets arrive and
move, the report, timeouts, leaving, and PyTorch's install (the stand-in torch) spilling its
newest blocks to a lowered grant."""

import os
import select
import shutil
import subprocess
import tempfile
import time
import unittest

from support import MiB, library_path, run_fresh

import uma_c

TOTAL = 1 << 30  # --arbiter-total 0:1 GiB
HOST = {"backend": "host", "host_devices": 1, "host_device_bytes": 8 << 30}


def host_allocator():
    return uma_c.Allocator.create(library_path(), **HOST)


class Arguments(unittest.TestCase):
    """Refused with TypeError/ValueError naming the argument: a UmaError would mean the library
    was called."""

    def setUp(self):
        self.a = host_allocator()

    def tearDown(self):
        self.a.close()

    def refused(self, kind, names, *args, **kwargs):
        with self.assertRaises(kind) as caught:
            self.a.join_arbiter(*args, **kwargs)
        self.assertNotIsInstance(caught.exception, uma_c.UmaError)
        self.assertIn(names, str(caught.exception))

    def test_target_and_name(self):
        self.refused(TypeError, "target", None, "x", wanted_bytes=MiB)
        self.refused(ValueError, "target", "", "x", wanted_bytes=MiB)
        self.refused(TypeError, "name", "unix:/x", 7, wanted_bytes=MiB)
        self.refused(ValueError, "name", "unix:/x", "", wanted_bytes=MiB)

    def test_claims(self):
        t = "unix:/nowhere"
        self.refused(TypeError, "claims", t, "x", claims={"wanted_bytes": MiB})
        self.refused(ValueError, "claims is empty", t, "x", claims=[])
        self.refused(TypeError, "claims[0]", t, "x", claims=[7])
        self.refused(TypeError, "colour", t, "x", claims=[{"wanted_bytes": MiB, "colour": 1}])
        self.refused(TypeError, "claims[0].wanted_bytes", t, "x", claims=[{"device": 0}])
        self.refused(ValueError, "claims[1].min_bytes", t, "x",
                     claims=[{"wanted_bytes": MiB}, {"device": 1, "wanted_bytes": 1,
                                                     "min_bytes": -1}])
        self.refused(ValueError, "claims[1] claims device 0 again", t, "x",
                     claims=[{"wanted_bytes": MiB}, {"wanted_bytes": MiB}])
        self.refused(TypeError, "claims[0].idle", t, "x", claims=[{"wanted_bytes": 1, "idle": 1}])

    def test_keywords(self):
        t = "unix:/nowhere"
        self.refused(TypeError, "wanted_bytes is missing", t, "x")
        self.refused(ValueError, "weight=4294967296", t, "x", wanted_bytes=MiB, weight=2**32)
        self.refused(TypeError, "priority", t, "x", wanted_bytes=MiB, priority=1.5)
        self.refused(TypeError, "not both", t, "x", claims=[{"wanted_bytes": 1}], wanted_bytes=1)

    def test_an_unreachable_node_is_the_library_s_refusal(self):
        with self.assertRaises(uma_c.UmaError) as caught:
            self.a.join_arbiter("unix:/nonexistent/uma.sock", "x", wanted_bytes=MiB)
        self.assertEqual(caught.exception.status_name, "UMA_ERR_BACKEND")
        self.assertIn("/nonexistent/uma.sock", str(caught.exception))


class Node:
    """A `uma serve --arbiter-total 0:1GiB` child on a private socket; tenant "big" of this uid
    may ask priority 10."""

    def __init__(self):
        cli = os.environ.get("UMA_CLI")
        if not cli:
            raise unittest.SkipTest("UMA_CLI is not set (run through ctest, or set it to the "
                                    "built uma)")
        self.dir = tempfile.mkdtemp(prefix="uma-py-arbiter-")
        self.target = f"unix:{self.dir}/s"
        policy = f"uid {os.getuid()}/big:0:0:10:1"
        self.process = subprocess.Popen(
            [cli, "serve", "--backend", "host", "--arbiter-total", f"0:{TOTAL}",
             "--arbiter-policy", policy, "--socket", f"{self.dir}/s"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 1)
            if ready and "listening on" in self.process.stdout.readline():
                return
        self.stop()
        raise AssertionError("uma serve did not say it is listening")

    def stop(self):
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Members(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.node = Node()

    @classmethod
    def tearDownClass(cls):
        cls.node.stop()

    def test_budgets_arrive_move_and_come_back(self):
        with host_allocator() as a1, host_allocator() as a2:
            with a1.join_arbiter(self.node.target, "first", wanted_bytes=TOTAL) as first:
                self.assertEqual(first.wait_budget(at_least=TOTAL), TOTAL)
                with a2.join_arbiter(self.node.target, "second",
                                     claims=[{"device": 0, "wanted_bytes": TOTAL}]) as second:
                    self.assertEqual(first.wait_budget(at_most=TOTAL // 2), TOTAL // 2)
                    self.assertEqual(a1.residency()["devices"][0]["budget_bytes"], TOTAL // 2)
                    second.want(256 * MiB)
                    self.assertEqual(first.wait_budget(at_least=TOTAL - 256 * MiB),
                                     TOTAL - 256 * MiB)
                    report = second.report()
                    self.assertEqual(report["devices"][0]["total_bytes"], TOTAL)
                    self.assertEqual(len(report["devices"][0]["members"]), 2)
                self.assertTrue(second.left)
                self.assertEqual(first.wait_budget(at_least=TOTAL), TOTAL)

    def test_member_calls_check_their_arguments(self):
        with host_allocator() as a:
            member = a.join_arbiter(self.node.target, "first", wanted_bytes=MiB)
            self.assertEqual(member.budget(), MiB)
            with self.assertRaises(ValueError):
                member.wait_budget(at_least=2, at_most=1)
            with self.assertRaises(ValueError):
                member.wait_budget(timeout_s=-1)
            with self.assertRaises(TypeError):
                member.want(MiB, idle="yes")
            with self.assertRaises(uma_c.UmaError) as caught:
                member.budget(device=1)
            self.assertIn("device 1", str(caught.exception))
            with self.assertRaises(TimeoutError) as caught:
                member.wait_budget(at_least=2 * MiB, timeout_s=0.05)
            self.assertEqual(caught.exception.status_name, "UMA_ERR_TIMEOUT")
        self.assertTrue(member.left)  # closing the allocator left first
        with self.assertRaises(ValueError):
            member.budget()
        member.leave()  # again: nothing

    def test_pytorch_s_blocks_follow_the_grant(self):
        r, _ = run_fresh(f"""
            import json, os
            import torch, uma_c, uma_torch
            uma_torch.install({library_path()!r}, **{HOST!r})
            hooks = torch.cuda.memory.current
            blocks = [(hooks.malloc(n, 0, None), n) for n in ({32 * MiB}, {64 * MiB},
                                                               {128 * MiB})]
            member = uma_torch.join_arbiter({self.node.target!r}, "torch", wanted_bytes={TOTAL})
            before = uma_torch.spilled_bytes()
            other = uma_c.Allocator.create({library_path()!r}, **{HOST!r})
            big = other.join_arbiter({self.node.target!r}, "big", wanted_bytes={TOTAL - 100 * MiB},
                                     priority=10)
            lowered = member.wait_budget(at_most={100 * MiB})
            spilled = uma_torch.spilled_bytes() - before
            try:
                uma_torch.join_arbiter({self.node.target!r}, "x", wanted_bytes=-1)
            except ValueError as error:
                refused = str(error)
            big.leave(); member.leave(); other.close()
            for p, n in blocks:
                hooks.free(p, n, 0, None)
            print(json.dumps(dict(lowered=lowered, spilled=spilled, refused=refused)))
            """, fakes=True)
        self.assertEqual(r["lowered"], 100 * MiB)
        self.assertEqual(r["spilled"], 128 * MiB)  # the newest block alone
        self.assertIn("wanted_bytes", r["refused"])


if __name__ == "__main__":
    unittest.main()
