#!/usr/bin/env python3
"""A PyTorch training step under four CUDA allocators, one process each (issue 13).

A GPT-2-shaped model from transformers.GPT2Config (random weights, nothing downloaded), batch
8 x 512 tokens, AdamW, bf16 autocast. Step time = wall time of forward+backward+optimizer step
between two torch.cuda.synchronize() calls; median over --steps after --warmup.

Allocators: native (PyTorch's caching allocator, the baseline), naive_managed (a pluggable
allocator calling cudaMallocManaged/cudaFree per block), naive_cache (power-of-two bins over
cudaMallocManaged, one mutex, no stream safety) and uma (python/uma_torch over libuma_c.so).

After timing, every run does one more step, keeps the gradients and checks: the pointer kind of
every parameter, gradient and optimizer-state storage (managed or not, through cuda-python and
the driver), the bytes of every CUDA storage Python can see (gc), and the allocator's own count
(uma: cache_in_use_bytes/live_bytes; native: torch.cuda.memory_allocated()).

    UMA_BENCH_LIB_DIR=DIR python3 bench/python/torch_step.py [--steps 20] [--json out.json]
    python3 bench/python/torch_step.py --dry-run      # plumbing only, no torch needed
"""

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ALLOCATORS = ("native", "naive_managed", "naive_cache", "uma")


def install_allocator(name, uma_options):
    """Chooses PyTorch's CUDA allocator; must run before anything touches CUDA. Returns the
    uma_torch module for the uma run, else None."""
    import torch
    if name == "uma":
        sys.path.insert(0, common.PYTHON_DIR)
        import uma_torch
        uma_torch.install(common.require_library("uma"), **uma_options)
        return uma_torch
    if name in common.PLUGGABLE:
        key, malloc_name, free_name = common.PLUGGABLE[name]
        pluggable = torch.cuda.memory.CUDAPluggableAllocator(common.require_library(key),
                                                             malloc_name, free_name)
        torch.cuda.memory.change_current_allocator(pluggable)
    return None


def visible_storage_bytes(torch, extra):
    """Bytes of the distinct CUDA storages of every tensor the garbage collector can see
    (parameters, gradients, optimizer states, inputs, ...), and how many storages."""
    storages = {}
    for obj in list(gc.get_objects()) + list(extra):
        try:
            if torch.is_tensor(obj) and obj.is_cuda:
                storage = obj.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
        except Exception:  # a half-built or freed object: not a storage anyone holds
            continue
    storages.pop(0, None)
    return sum(storages.values()), len(storages)


def verify(torch, model, optimizer, uma_torch):
    """The pointer kinds and the byte counts described in the module doc."""
    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    states = [value for state in optimizer.state.values() for value in state.values()
              if torch.is_tensor(value) and value.is_cuda]
    groups = {"parameters": params, "gradients": grads, "optimizer_states": states}
    kinds = {}
    for group, tensors in groups.items():
        pointers = [t.untyped_storage().data_ptr() for t in tensors]
        kinds[group] = {"tensors": len(tensors), "managed": common.count_managed(pointers)}
    visible, storages = visible_storage_bytes(torch, params + grads + states)
    report = {"pointer_kinds": kinds, "visible_storage_bytes": visible,
              "visible_storages": storages}
    if uma_torch is not None:
        report["uma_stats"] = uma_torch.stats()
    for key in ("memory_allocated", "memory_reserved", "max_memory_reserved"):
        try:
            report[key] = getattr(torch.cuda, key)()
        except Exception as error:  # pluggable allocators may not report it
            report[key] = f"unavailable: {str(error).splitlines()[0]}"
    if uma_torch is not None:  # after the timed steps: what empty_cache gives back
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        report["uma_stats_after_empty_cache"] = uma_torch.stats()
    return report


def build(torch, args):
    import transformers
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=args.heads,
                                     n_positions=max(1024, args.seq))
    model = transformers.GPT2LMHeadModel(config).cuda().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq), device="cuda")
    return model, optimizer, tokens


def child(args):
    name = args.child
    steps, warmup = args.steps, args.warmup
    if name == "naive_managed":  # ~1 s a step: fewer steps keep the run within its time
        steps, warmup = min(steps, args.slow_steps), min(warmup, 2)
    if args.dry_run:
        library = None if name == "native" else common.library_path(
            common.PLUGGABLE.get(name, ("uma",))[0])
        common.emit({"allocator": name, "dry_run": True, "library": library, "steps": steps, "step_ms": None})
        return
    uma_torch = install_allocator(name, common.parse_uma_options(args.uma_option))
    import torch
    model, optimizer, tokens = build(torch, args)

    def step(keep_grads=False):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        if not keep_grads:
            optimizer.zero_grad(set_to_none=True)
        return loss

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    samples = []
    for _ in range(steps):
        started = time.perf_counter()
        step()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - started) * 1e3)
    loss = step(keep_grads=True)
    torch.cuda.synchronize()
    report = verify(torch, model, optimizer, uma_torch)
    optimizer.zero_grad(set_to_none=True)
    common.emit({"allocator": name, "steps": steps, "warmup": warmup,
                 "step_ms": common.summary(samples)["median"], "summary": common.summary(samples),
                 "samples_ms": samples, "loss": float(loss), "verify": report,
                 "device": torch.cuda.get_device_name(0), "torch": torch.__version__})


def managed_cell(result, group):
    kinds = result.get("verify", {}).get("pointer_kinds", {}).get(group)
    if not kinds:
        return "-"
    answers = sorted(set(str(v) for v in kinds["managed"].values())) or ["no checker"]
    return f"{'|'.join(answers)}/{kinds['tensors']}"


def report(names, results):
    baseline = results.get(names[0], {}).get("step_ms")
    cache = results.get("naive_cache", {}).get("step_ms")
    header = ["allocator", "step ms (median)", f"x {names[0]}", "x naive_cache", "steps",
              "loss", "managed params", "grads", "opt states"]
    rows = []
    for name in names:
        result = results[name]
        rows.append([name, common.fmt(result.get("step_ms")),
                     common.fmt(common.ratio(result.get("step_ms"), baseline), 3),
                     common.fmt(common.ratio(result.get("step_ms"), cache), 3),
                     common.fmt(result.get("steps")), common.fmt(result.get("loss"), 4),
                     managed_cell(result, "parameters"), managed_cell(result, "gradients"),
                     managed_cell(result, "optimizer_states")])
    common.print_table(header, rows)
    common.print_rounds(names, results)
    print("managed x/N: storages whose pointer is managed memory, per checker (a|b when the "
          "checkers disagree)")
    verified = True
    for name in names:
        verify = results[name].get("verify")
        if verify:
            ok, line = managed_verdict(name, verify)
            verified = verified and ok
            print(line)
            print(accounting_line(name, verify))
    return verified
    for name in names:
        if "error" in results[name]:
            print(f"{name}: FAILED: {results[name]['error'].splitlines()[0]}")


def managed_verdict(name, verify):
    """(ok, line): whether every parameter, gradient and optimizer-state storage is managed
    memory by every checker (for native: whether none is, which shows the checkers work)."""
    kinds = verify.get("pointer_kinds", {})
    expected_none = name == "native"
    problems, total = [], 0
    for group, kind in kinds.items():
        total += kind["tensors"]
        if not kind["managed"]:
            problems.append(f"{group}: no pointer checker available")
        for checker, count in kind["managed"].items():
            want = 0 if expected_none else kind["tensors"]
            if count != want:
                problems.append(f"{group}: {count} of {kind['tensors']} managed by {checker}")
    what = "none is managed memory" if expected_none else "every one is managed memory"
    if problems:
        return False, f"{name}: NOT VERIFIED that {what}: " + "; ".join(problems)
    return True, f"{name}: verified, {total} parameter/gradient/optimizer-state storages: {what}"


def accounting_line(name, verify):
    mib = 1 << 20
    visible = verify["visible_storage_bytes"]
    line = f"{name}: visible CUDA storages {visible / mib:.1f} MiB ({verify['visible_storages']})"
    allocated = verify.get("memory_allocated")
    if isinstance(allocated, int):
        line += f"; memory_allocated {allocated / mib:.1f} MiB (+{(allocated - visible) / mib:.1f}" \
                " not held by a visible tensor: cuBLAS workspaces etc.)"
    stats = verify.get("uma_stats")
    if stats:
        requested, in_use = stats.get("cache_requested_bytes"), stats["cache_in_use_bytes"]
        if requested is not None:
            line += (f"; uma requested (what PyTorch holds) {requested / mib:.1f} MiB "
                     f"({requested - visible:+d} bytes against visible)")
        rounding = "" if requested is None else \
            f", rounding {in_use - requested} bytes in {stats['cache_blocks_in_use']} blocks"
        line += (f"; uma in use {in_use / mib:.1f} MiB (x"
                 f"{common.fmt(common.ratio(in_use, visible), 4)} of visible{rounding}); live "
                 f"{stats['live_bytes'] / mib:.1f} MiB, cache free "
                 f"{stats['cache_free_bytes'] / mib:.1f} MiB, hits {stats['cache_hits']} misses "
                 f"{stats['cache_misses']}")
    reserved = verify.get("max_memory_reserved")
    if isinstance(reserved, int):
        line += (f"; PyTorch reserved {verify.get('memory_reserved', 0) / mib:.1f} MiB "
                 f"(peak {reserved / mib:.1f})")
    emptied = verify.get("uma_stats_after_empty_cache")
    if emptied:
        line += (f"; after torch.cuda.empty_cache(): uma live {emptied['live_bytes'] / mib:.1f}"
                 f" MiB, cache free {emptied['cache_free_bytes'] / mib:.1f} MiB")
    return line


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser, ALLOCATORS)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--slow-steps", type=int, default=6,
                        help="steps for naive_managed (about 1 s each)")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    args = parser.parse_args()
    if min(args.steps, args.slow_steps, args.layers, args.width, args.heads, args.batch,
           args.seq) < 1 or args.warmup < 0 or args.width % args.heads:
        parser.error("sizes must be positive and --width a multiple of --heads")
    if args.child:
        common.checked_allocators(args.child, ALLOCATORS)
        return child(args)
    names = common.checked_allocators(args.allocators, ALLOCATORS)
    names, results = common.collect(__file__, names, args,
                                    lambda r: r.get("step_ms"))
    print(f"\n== PyTorch training step: GPT-2 {args.layers} layers x {args.width}, batch "
          f"{args.batch} x {args.seq}, AdamW, bf16 autocast")
    verified = report(names, results)
    common.write_json(args.json, {"benchmark": "torch_step", "args": vars(args),
                                  "environment": common.environment_report(),
                                  "results": results})
    return 0 if verified and all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
