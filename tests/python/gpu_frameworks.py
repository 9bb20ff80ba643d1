#!/usr/bin/env python3
"""The adapters on a real GPU with real PyTorch and CuPy (the GPU machine; run by
bench/python/run_all.sh, part "tests"). Each framework runs in a fresh process, because an
allocator can only be installed before CUDA is initialised. Skips, saying why, where torch,
CuPy or a device is missing.

    UMA_LIBRARY=.../libuma_c.so python3 tests/python/gpu_frameworks.py -v
"""

import importlib.util
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import MiB, library_path, run_fresh  # noqa: E402

BENCH_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                         "python")
QUOTA = 8 << 30  # the GPU machine's rule: stay far below the card's memory


def child_code(template):
    return (template.replace("@BENCH_DIR@", repr(BENCH_DIR)).replace("@QUOTA@", str(QUOTA))
            .replace("@LIBRARY@", repr(library_path())))


def needs(module):
    if importlib.util.find_spec(module) is None:
        raise unittest.SkipTest(f"{module} is not installed here")


TORCH_CHILD = """
import json, sys
sys.path.insert(0, @BENCH_DIR@)
import common, torch, uma_torch
uma_torch.install(@LIBRARY@, quota_bytes=@QUOTA@)
if not torch.cuda.is_available():
    print(json.dumps(dict(skip="no usable CUDA device"))); sys.exit(0)
out = {}
x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
out["sum_ok"] = float((x * 2).sum()) == float(2 * sum(range(1 << 20)))
out["managed"] = common.count_managed([x.untyped_storage().data_ptr()])
s = uma_torch.stats(); out["in_use_grew"] = s["cache_in_use_bytes"] >= x.untyped_storage().nbytes()
uma_torch.prefetch(x, "cpu"); uma_torch.prefetch(x, 0); torch.cuda.synchronize()
uma_torch.advise(x, "set_read_mostly"); uma_torch.advise(x, "unset_read_mostly")
uma_torch.advise(x, "set_preferred_location", 0)
out["still_ok"] = float(x[-1]) == float((1 << 20) - 1)
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    y = torch.ones(1 << 18, device="cuda") * 3
side.synchronize()
out["side_ok"] = float(y.sum()) == 3.0 * (1 << 18)
scratch = torch.empty(1 << 20, device="cuda"); uma_torch.discard(scratch)
before = uma_torch.stats()["cache_in_use_bytes"]
del y, scratch
torch.cuda.synchronize()
out["freed"] = uma_torch.stats()["cache_in_use_bytes"] < before
held = uma_torch.stats()["live_bytes"]
uma_torch.set_quota(held + (64 << 20))
try:
    big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    out["quota"] = "null data_ptr" if big.data_ptr() == 0 else "allocated"
    del big
except RuntimeError as error:  # torch.OutOfMemoryError is one
    out["quota"] = "raised " + type(error).__name__
uma_torch.set_quota(@QUOTA@)
try:
    uma_torch.allocator().prefetch(0x7E5700000000, 64, 0); out["unknown"] = "accepted"
except uma_torch.UmaError as error:
    out["unknown"] = error.status_name
print(json.dumps(out))
"""

CUPY_CHILD = """
import gc, json, sys
sys.path.insert(0, @BENCH_DIR@)
import common, uma_cupy
uma_cupy.install(@LIBRARY@, quota_bytes=@QUOTA@)
import cupy
if cupy.cuda.runtime.getDeviceCount() == 0:
    print(json.dumps(dict(skip="no usable CUDA device"))); sys.exit(0)
out = {}
before = uma_cupy.stats()["cache_in_use_bytes"]
a = cupy.arange(1 << 20, dtype=cupy.float32)
out["sum_ok"] = float((a * 2).sum()) == float(2 * sum(range(1 << 20)))
out["managed"] = common.count_managed([a.data.ptr])
out["in_use_grew"] = uma_cupy.stats()["cache_in_use_bytes"] - before >= a.nbytes
uma_cupy.prefetch(a); cupy.cuda.Device().synchronize()
with cupy.cuda.Stream() as side:
    b = cupy.ones(1 << 18, dtype=cupy.float32) * 3
    side.synchronize()
out["side_ok"] = float(b.sum()) == 3.0 * (1 << 18)
del a, b
gc.collect(); cupy.cuda.Device().synchronize()
out["pooled"] = uma_cupy.memory_pool() is not None
uma_cupy.trim()  # CuPy's pool keeps its segments until emptied
out["freed"] = uma_cupy.stats()["cache_in_use_bytes"] == before
print(json.dumps(out))
"""

OFFLOAD_CHILD = """
import json, sys
import torch, uma_torch
uma_torch.install(@LIBRARY@, quota_bytes=@QUOTA@)
if not torch.cuda.is_available():
    print(json.dumps(dict(skip="no usable CUDA device"))); sys.exit(0)
if not uma_torch.allocator().has_plans():
    print(json.dumps(dict(skip="this libuma_c.so has no plan calls"))); sys.exit(0)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(256, 512)
        self.blocks = torch.nn.ModuleList([torch.nn.Sequential(
            torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.LayerNorm(512))
            for _ in range(8)])
        self.head = torch.nn.Linear(512, 1)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = x + block(x)
        return self.head(x).square().mean()

def train(policy, budget_of, **options):
    torch.manual_seed(0)
    model = Net().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    state = 16 * sum(p.numel() for p in model.parameters())
    handle = None if policy is None else uma_torch.offload(model, opt,
                                                            budget_bytes=budget_of(state),
                                                            policy=policy, **options)
    generator = torch.Generator().manual_seed(1)
    losses, grads_after_backward = [], 0
    for _ in range(5):
        x = torch.randn(64, 256, generator=generator).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x)
        loss.backward()
        grads_after_backward += sum(p.grad is not None for p in model.parameters())
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))
    out = dict(losses=losses, grads_after_backward=grads_after_backward)
    if handle is not None:
        report = uma_torch.residency()["devices"][0]
        out.update(static=handle.static, budget=report["budget_bytes"], peak=report["peak_bytes"],
                   wanted=budget_of(state), stats=handle.stats)
        handle.undo()
        out["held_after"] = uma_torch.residency()["devices"][0]["held_bytes"]
    return out

print(json.dumps(dict(reference=train(None, None), auto=train("auto", lambda s: s // 3),
                      dynamic=train("dynamic", lambda s: s // 3),
                      backward=train("auto", lambda s: s // 3, step_in_backward=True,
                                     chunk_bytes=1 << 20))))
"""


def run_and_check_common(test, framework, child):
    """Runs `child` in a fresh process and checks what both frameworks' children report: the
    result computed in uma memory, every pointer managed, uma's in-use bytes grown."""
    needs(framework)
    result, _ = run_fresh(child_code(child), timeout=300)
    if "skip" in result:
        test.skipTest(result["skip"])
    test.assertTrue(result["sum_ok"])
    test.assertTrue(all(v == 1 for v in result["managed"].values()) and result["managed"],
                    f"pointer kinds: {result['managed']}")
    test.assertTrue(result["in_use_grew"])
    return result


class TorchOnGpuTest(unittest.TestCase):
    def test_tensors_live_in_uma_memory_and_every_operation_works(self):
        result = run_and_check_common(self, "torch", TORCH_CHILD)
        self.assertTrue(result["still_ok"], "prefetch/advise keep the contents")
        self.assertTrue(result["side_ok"])
        self.assertTrue(result["freed"])
        # PyTorch's pluggable allocator does not check for NULL: uma_torch_malloc must make
        # PyTorch raise, or a tensor over the quota would have a null data pointer.
        self.assertTrue(result["quota"].startswith("raised"), result["quota"])
        self.assertEqual(result["unknown"], "UMA_ERR_UNKNOWN_POINTER")


class TorchOffloadOnGpuTest(unittest.TestCase):
    def test_offload_trains_as_in_memory_within_the_budget_and_undo_ends_every_plan(self):
        needs("torch")
        result, _ = run_fresh(child_code(OFFLOAD_CHILD), timeout=300)
        if "skip" in result:
            self.skipTest(result["skip"])
        reference = result["reference"]["losses"]
        for policy in ("auto", "dynamic", "backward"):
            run = result[policy]
            for got, want in zip(run["losses"], reference):
                self.assertAlmostEqual(got, want, delta=1e-4 * max(1.0, abs(want)),
                                       msg=f"{policy}: {run['losses']} vs {reference}")
            self.assertEqual(run["budget"], run["wanted"], policy)
            self.assertLessEqual(run["peak"], run["budget"], f"{policy}: {run['stats']}")
            self.assertEqual(run["held_after"], 0, f"{policy}: undo ended every plan")
        self.assertTrue(result["auto"]["static"], "the gradients fit in a third: static plans")
        self.assertFalse(result["dynamic"]["static"])
        backward = result["backward"]
        self.assertGreater(backward["stats"]["step_chunks"], 5, "several chunks a step")
        self.assertEqual(backward["grads_after_backward"], 0,
                         "stepped in the backward pass: every gradient let go")
        self.assertGreater(result["auto"]["grads_after_backward"], 0)


CUPY_PLANS_CHILD = """
import json, sys
import uma_c, uma_cupy
uma_cupy.install(@LIBRARY@, pool=False, quota_bytes=@QUOTA@, driver_counters=1)
import cupy
if cupy.cuda.runtime.getDeviceCount() == 0:
    print(json.dumps(dict(skip="no usable CUDA device"))); sys.exit(0)
if not uma_cupy.allocator().has_plans():
    print(json.dumps(dict(skip="this libuma_c.so has no plan calls"))); sys.exit(0)
MiB = 1 << 20
arrays = [cupy.full(4 * MiB, float(i), dtype=cupy.float32) for i in range(6)]  # 16 MiB each
for a in arrays:
    uma_cupy.prefetch(a, uma_c.DEVICE_HOST)
cupy.cuda.Device().synchronize()
uma_cupy.set_device_budget(0, 40 * MiB)  # two arrays of six
before = uma_cupy.residency()
sums = []
for rounds in range(2):
    for i, a in enumerate(arrays):
        uma_cupy.will_access(a, mode="write", policy="migrate")
        a += 1.0
        sums.append(float(a.sum()) == 4 * MiB * (i + 1.0 + rounds))
        uma_cupy.done_with(a)
cupy.cuda.Device().synchronize()
after = uma_cupy.residency()
uma_cupy.will_access(arrays[0], mode="write", policy="migrate")
uma_cupy.done_with(arrays[0])
dead = uma_cupy.dead(arrays[0])
try:
    uma_cupy.will_access([cupy.ndarray(1, dtype=cupy.float32,
                          memptr=cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(
                              0x7E5700000000, 4, None), 0))], device=0)
    unknown = "accepted"
except uma_cupy.UmaError as error:
    unknown = error.status_name
device = after["devices"][0]
print(json.dumps(dict(
    sums=sums, budget=device["budget_bytes"], peak=device["peak_bytes"],
    to_device=after["to_device_bytes"] - before["to_device_bytes"],
    to_host=after["to_host_bytes"] - before["to_host_bytes"],
    driver_on=after["driver_counters_on"],
    driver_to_device=after["driver_to_device_bytes"] - before["driver_to_device_bytes"],
    fault_to_device=(after["driver_fault_to_device_bytes"]
                     - before["driver_fault_to_device_bytes"]),
    dead=dead, unknown=unknown)))
"""


class CupyPlansOnGpuTest(unittest.TestCase):
    def test_plans_keep_arrays_beyond_the_budget_correct_and_the_driver_faults_little(self):
        needs("cupy")
        result, _ = run_fresh(child_code(CUPY_PLANS_CHILD), timeout=300)
        if "skip" in result:
            self.skipTest(result["skip"])
        self.assertTrue(all(result["sums"]) and len(result["sums"]) == 12, result["sums"])
        self.assertEqual(result["budget"], 40 * MiB)
        self.assertLessEqual(result["peak"], result["budget"])
        # 12 plans of 16 MiB with room for two: each placement moves the array in, evictions
        # move the written ones out.
        self.assertGreaterEqual(result["to_device"], 10 * 16 * MiB, result)
        self.assertGreater(result["to_host"], 0, result)
        self.assertTrue(result["driver_on"], "driver_counters=1 on the CUDA backend")
        self.assertGreaterEqual(result["driver_to_device"], result["to_device"],
                                "the driver saw uma's prefetches")
        self.assertLessEqual(result["fault_to_device"], result["to_device"] // 100,
                             "planned data: the driver moves (nearly) nothing on its own")
        self.assertEqual(result["unknown"], "UMA_ERR_UNKNOWN_POINTER")


class CupyOnGpuTest(unittest.TestCase):
    def test_arrays_live_in_uma_memory_and_go_back_when_dropped(self):
        result = run_and_check_common(self, "cupy", CUPY_CHILD)
        self.assertTrue(result["pooled"], "CuPy's pool sits in front of uma by default")
        self.assertTrue(result["side_ok"])
        self.assertTrue(result["freed"])


if __name__ == "__main__":
    unittest.main()
