#!/usr/bin/env python3
"""A training step with the model's state (parameters, AdamW's state) in a uma pool against the
same model in PyTorch's own memory, in one process, interleaved (issue 36: <= 1.03x). Both
models start from one seed and see the same batches; activations and gradients are PyTorch's
in both. Prints every round, the medians and the ratio, and writes --json.

    UMA_LIBRARY=.../libuma_c.so python3 bench/python/pool_bench.py [--layers 24 --width 1024]
"""

import argparse
import contextlib
import json
import statistics
import sys
import time


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=5, help="timed steps of each model per round")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the results here")
    return p.parse_args()


def step(torch, model, optimizer, tokens):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(tokens)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def timed(torch, model, optimizer, batches):
    torch.cuda.synchronize()
    start = time.perf_counter()
    for tokens in batches:
        step(torch, model, optimizer, tokens)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3 / len(batches)


def main():
    args = arguments()
    import torch
    import uma_torch
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from offload_bench import build
    args.__dict__.setdefault("seed", 0)
    native = build(torch, args)
    pool = uma_torch.pool(label="model-state")
    with pool:
        pooled = build(torch, args)
    opts = {name: torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
            for name, m in (("native", native), ("pool", pooled))}
    models = {"native": native, "pool": pooled}
    generator = torch.Generator().manual_seed(args.seed)
    batches = [torch.randint(0, args.vocab, (args.batch, args.seq), generator=generator).cuda()
               for _ in range(args.steps)]
    for name in models:  # the first step makes AdamW's state: the pool's in the pool
        with pool if name == "pool" else contextlib.nullcontext():
            for tokens in batches[:args.warmup]:
                step(torch, models[name], opts[name], tokens)
    in_pool = all(pool.owns(v) for s in opts["pool"].state.values() for v in s.values()
                  if torch.is_tensor(v) and v.is_cuda) and \
        all(pool.owns(p) for p in pooled.parameters())
    rounds = []
    for r in range(args.rounds):
        order = ["native", "pool"] if r % 2 == 0 else ["pool", "native"]
        row = {name: timed(torch, models[name], opts[name], batches) for name in order}
        rounds.append(row)
        print(f"round {r}: native {row['native']:.2f} ms  pool {row['pool']:.2f} ms  "
              f"ratio {row['pool'] / row['native']:.4f}", flush=True)
    med = {name: statistics.median(r[name] for r in rounds) for name in models}
    ratios = [r["pool"] / r["native"] for r in rounds]
    result = {"device": torch.cuda.get_device_name(), "config": vars(args), "rounds": rounds,
              "median_ms": med, "ratio_of_medians": med["pool"] / med["native"],
              "median_ratio": statistics.median(ratios), "state_in_pool": in_pool,
              "pool_uma_stats": {k: pool.stats()[k] for k in ("live_bytes", "allocations")}}
    print(f"median: native {med['native']:.2f} ms  pool {med['pool']:.2f} ms  "
          f"ratio {result['ratio_of_medians']:.4f} (median of round ratios "
          f"{result['median_ratio']:.4f}); state in the pool: {in_pool}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
