#!/usr/bin/env python3
"""Spill instead of OOM under uma_torch.install() (issue 36; docs/frameworks.md "Spill instead of
OOM"): a linear stack trained with AdamW under torch.cuda.set_per_process_memory_fraction, in a
fresh process per row: PyTorch's own allocator at each fraction (it raises OutOfMemoryError
where the model does not fit), uma at the same fraction, and PyTorch's allocator without a
fraction (the in-memory baseline). Prints each row's step times, the median after the first
step, the ratio to the baseline, PyTorch's allocated peak against the limit and uma's bytes
spilled; writes --json.

    UMA_LIBRARY=.../libuma_c.so python3 bench/python/spill_bench.py [--fractions 0.085,0.07,0.05]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time, torch
allocator, fraction, width, layers, steps = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5])
if allocator == "uma":
    import uma_torch
    uma_torch.install(quota_bytes=24 << 30)
if fraction < 1:
    torch.cuda.set_per_process_memory_fraction(fraction)
torch.manual_seed(0)
out = {"allocator": allocator, "fraction": fraction}
try:
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for _ in range(steps):
        torch.cuda.synchronize(); start = time.perf_counter()
        loss = model(torch.randn(512, width, device="cuda")).square().mean()
        loss.backward(); optimizer.step(); optimizer.zero_grad()
        torch.cuda.synchronize(); times.append((time.perf_counter() - start) * 1e3)
    out.update(completed=True, step_ms=times, loss=float(loss.detach()))
except torch.OutOfMemoryError as error:
    out.update(completed=False, error=str(error).splitlines()[0][:200])
if allocator == "uma":
    import uma_torch
    out.update(spilled=uma_torch.spilled_bytes(), allocated_peak=uma_torch.max_memory_allocated(),
               limit=uma_torch.residency()["devices"][0]["budget_bytes"])
else:
    out.update(allocated_peak=torch.cuda.max_memory_allocated())
print(json.dumps(out))
"""


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fractions", default="0.085,0.07,0.05")
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--json")
    return p.parse_args()


def row(allocator, fraction, args):
    done = subprocess.run([sys.executable, "-c", CHILD, allocator, str(fraction), str(args.width),
                           str(args.layers), str(args.steps)], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ))
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"allocator": allocator, "fraction": fraction, "completed": False,
                "error": f"exit {done.returncode}: {done.stderr[-300:]}"}
    return json.loads(lines[-1])


def steady(r):
    return statistics.median(r["step_ms"][1:]) if r.get("completed") else None


def main():
    args = arguments()
    import torch
    total = torch.cuda.get_device_properties(0).total_memory
    baseline = row("native", 1.0, args)
    rows = [baseline]
    for fraction in (float(f) for f in args.fractions.split(",")):
        rows += [row("native", fraction, args), row("uma", fraction, args)]
    base = steady(baseline)
    print(f"{torch.cuda.get_device_name()}: {args.layers} x {args.width} linear stack, AdamW, "
          f"batch 512; in device memory: {base:.1f} ms a step, allocated peak "
          f"{baseline['allocated_peak'] / 2**30:.2f} GiB")
    for r in rows[1:]:
        limit = r["fraction"] * total / 2**30
        if not r.get("completed"):
            print(f"  {r['allocator']:6} fraction {r['fraction']:.3f} ({limit:.2f} GiB): "
                  f"{r.get('error', 'failed')[:120]}")
            continue
        extra = f", spilled {r['spilled'] / 2**30:.2f} GiB" if "spilled" in r else ""
        print(f"  {r['allocator']:6} fraction {r['fraction']:.3f} ({limit:.2f} GiB): steps "
              f"{', '.join(f'{t:.0f}' for t in r['step_ms'])} ms; {steady(r):.1f} ms = "
              f"{steady(r) / base:.2f}x in memory; allocated peak "
              f"{r['allocated_peak'] / 2**30:.2f} GiB{extra}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"device": torch.cuda.get_device_name(), "config": vars(args),
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
