#!/usr/bin/env python3
"""Inference beyond the device budget (issue 39): uma_torch.offload(model, budget_bytes=W/k)
without an optimizer against the model in memory and accelerate's CPU offload, one fresh
process per variant, the budgets interleaved over rounds inside it.

A Llama-shaped model from transformers.LlamaConfig (default hidden 4096, intermediate 11008,
20 layers, 32 heads, vocabulary 32000: W = 8.6 GB of bf16 weights), random weights made on the
GPU in bf16 (nothing downloaded), eval mode, torch.no_grad. Measured per configuration, after a
warm-up, in every round:

  prefill   one forward of batch 1 x --prompt tokens (ms, median of --prefill-repeats)
  decode    greedy, one token at a time with the KV cache: --decode-tokens tokens after a
            --decode-prompt-token prompt (ms per token); the tokens are kept, and must equal the
            native run's
  link      a 1 GiB copy pinned host -> device and back in the same process (GB/s, best of 3):
            PyTorch's pinned memory and cudaMalloc memory (native, accelerate); uma's host tier
            and device memory through uma_copy (uma)

Variants (a process each: uma's install() must come before anything touches CUDA, and
accelerate must not run under uma):
  native      PyTorch's allocator, the model resident: the reference
  uma         uma_torch.install(); each round offload(model, budget_bytes=P/k) for k = 3, 2, 1
              (P: what planning every weight is charged, W rounded to pages), measure, undo
  accelerate  the model moved to the CPU, then accelerate.infer_auto_device_map(max_memory=
              {0: W/k, "cpu": ...}, no_split_module_classes=[the decoder layer]) and
              dispatch_model, for k = 3, 2; hooks removed and the model back on the CPU between

Floors per k: the bytes that stream a forward pass (uma's streamed layers at that budget; else
W - W/k) over the link's host -> device speed, and never below native: decode
max(native decode, bytes / link) a token, prefill max(native prefill, bytes / link).

    UMA_BENCH_LIB_DIR=DIR python3 bench/python/infer_bench.py [--rounds 3] [--json out.json]
    python3 bench/python/infer_bench.py --layers 2 --hidden 512 --intermediate 1408 --heads 8
    python3 bench/python/infer_bench.py --dry-run      # no torch, no GPU: the plumbing
"""

import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

VARIANTS = ("native", "uma", "accelerate")
FACTORS = {"uma": (3, 2, 1), "accelerate": (3, 2)}  # smallest budget first (see uma_child)
GiB = 1 << 30
LINK_BYTES = 1 << 30


def row_names(variants):
    """The table's rows, in order: native, uma_1x..3x, accelerate_2x..3x (those run)."""
    rows = ["native"] if "native" in variants else []
    for variant in ("uma", "accelerate"):
        if variant in variants:
            rows += [f"{variant}_{k}x" for k in sorted(FACTORS[variant])]
    return rows


# --- the model and what is measured -----------------------------------------------------------

def build(torch, args):
    """The Llama-shaped model on cuda, bf16, random weights from the seed, eval mode."""
    import transformers
    config = transformers.LlamaConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads,
        num_key_value_heads=args.heads, tie_word_embeddings=False,
        max_position_embeddings=max(4096, args.prompt, args.decode_prompt + args.decode_tokens))
    torch.manual_seed(args.seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # made in bf16 on the device: no fp32 copy, fast
    try:
        with torch.device("cuda"):
            model = transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    kinds = {str(p.dtype) for p in model.parameters()} | {str(p.device.type)
                                                           for p in model.parameters()}
    if kinds != {"torch.bfloat16", "cuda"}:
        raise SystemExit(f"bench: the model was built as {sorted(kinds)}, not bf16 on cuda")
    return model.eval()


def weight_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters())


def token_sets(torch, args):
    """(prefill tokens, decode prompt) on cuda, from a CPU generator seeded once: the same in
    every process."""
    generator = torch.Generator().manual_seed(args.seed)
    prefill = torch.randint(0, args.vocab, (1, args.prompt), generator=generator)
    prompt = torch.randint(0, args.vocab, (1, args.decode_prompt), generator=generator)
    return prefill.cuda(), prompt.cuda()


def prefill_ms(torch, model, tokens, repeats):
    """The median of `repeats` forwards of `tokens` (no cache), each between synchronizes."""
    times = []
    with torch.no_grad():
        for _ in range(repeats):
            torch.cuda.synchronize()
            start = time.perf_counter()
            model(input_ids=tokens, use_cache=False)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def decode(torch, model, prompt, count):
    """(ms per token, the tokens): the prompt's forward with the cache, then `count` greedy
    steps of one token each, timed between synchronizes (the prompt's forward not included)."""
    tokens = []
    with torch.no_grad():
        out = model(input_ids=prompt, use_cache=True)
        past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(count):
            out = model(input_ids=token, past_key_values=past, use_cache=True)
            past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
            tokens.append(token)
        torch.cuda.synchronize()
        elapsed = (time.perf_counter() - start) * 1e3
    return elapsed / max(count, 1), torch.cat(tokens, 1)[0].tolist() if tokens else []


def warm_up(torch, model, prefill, prompt):
    prefill_ms(torch, model, prefill, 1)
    decode(torch, model, prompt, 2)


def measure(torch, model, prefill, prompt, args):
    """One round of one configuration: prefill and decode (after a warm-up)."""
    warm_up(torch, model, prefill, prompt)
    result = {"prefill_ms": prefill_ms(torch, model, prefill, args.prefill_repeats)}
    result["decode_ms"], result["tokens"] = decode(torch, model, prompt, args.decode_tokens)
    return result


def timed_copies(torch, copy, nbytes, stream):
    """{"h2d": GB/s, "d2h": GB/s}, best of three, of copy(direction) enqueued on `stream`."""
    out = {}
    for direction in ("h2d", "d2h"):
        best = 0.0
        for _ in range(3):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record(stream)
            copy(direction)
            end.record(stream)
            end.synchronize()
            best = max(best, nbytes / (start.elapsed_time(end) * 1e-3) / 1e9)
        out[direction] = best
    return out


def torch_link(torch, nbytes):
    """The link as PyTorch's pinned memory and cudaMalloc memory see it (non-blocking
    copy_)."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True).fill_(0x5A)
    device = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream()

    def copy(direction):
        dst, src = (device, host) if direction == "h2d" else (host, device)
        dst.copy_(src, non_blocking=True)

    try:
        return timed_copies(torch, copy, nbytes, stream)
    finally:
        del host, device


def uma_link(torch, allocator, nbytes):
    """The link as the streamed layers cross it: uma's host tier to its device memory and
    back through uma_copy on a side stream."""
    host = allocator.host_alloc(nbytes)
    device = allocator.device_alloc(nbytes, 0)
    ctypes.memset(host, 0x5A, nbytes)
    stream = torch.cuda.Stream()
    try:
        return timed_copies(torch, lambda d: allocator.copy(
            device if d == "h2d" else host, host if d == "h2d" else device, nbytes, stream),
            nbytes, stream)
    finally:
        stream.synchronize()
        allocator.tier_free(host)
        allocator.tier_free(device)


def progress(config, round_index, result):
    """A round's figures, printed as they come: a JSON line (the parent echoes it)."""
    shown = {k: v for k, v in result.items() if k != "tokens"}
    print(json.dumps(dict(config=config, round=round_index, **shown)), flush=True)


def attempt(config, round_index, one, work):
    """work() fills `one`; a failure is kept in it ("error") and the next configuration runs."""
    try:
        work()
    except Exception as error:  # one configuration failing must not hide the others' figures
        one["error"] = f"{type(error).__name__}: {error}"
    progress(config, round_index, one)
    return one


def summarize(rounds):
    """The rounds of one configuration: each figure's median over the rounds that did not
    fail (every round kept, in order)."""
    out = {"rounds": rounds, "errors": [r["error"] for r in rounds if "error" in r]}
    rounds = [r for r in rounds if "error" not in r]
    for key in ("prefill_ms", "decode_ms", "exposed_prefill_ms", "exposed_decode_ms",
                "copy_bytes_per_forward"):
        values = [r[key] for r in rounds if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    out["tokens"] = rounds[-1].get("tokens") if rounds else None
    out["same_tokens_every_round"] = len({tuple(r.get("tokens") or ()) for r in rounds}) <= 1
    return out


def link_summary(links):
    return {d: statistics.median(link[d] for link in links) for d in ("h2d", "d2h")}


# --- the variants -------------------------------------------------------------------------------

def native_child(torch, args, result):
    model = build(torch, args)
    prefill, prompt = token_sets(torch, args)
    rounds, links = [], []
    for r in range(args.rounds):
        links.append(torch_link(torch, LINK_BYTES))
        torch.cuda.reset_peak_memory_stats()
        one = measure(torch, model, prefill, prompt, args)
        one["memory_peak_bytes"] = torch.cuda.max_memory_allocated()
        progress("native", r, one)
        rounds.append(one)
    result.update(weights_bytes=weight_bytes(model), link_gbps=link_summary(links),
                  configs={"native": summarize(rounds)})


def uma_child(uma_torch, torch, args, result):
    """Each round offload -> measure -> undo at every budget, the smallest first: the residency
    report's peak is the process's, so only the first round's peaks are each budget's own
    (later ones are at least the largest budget's)."""
    from uma_torch import stream_partition
    model = build(torch, args)
    allocator = uma_torch.allocator()
    planned = stream_partition.planned_bytes(list(model.parameters()))
    prefill, prompt = token_sets(torch, args)
    configs = {k: [] for k in FACTORS["uma"]}
    budgets = {k: math.ceil(planned / k) for k in FACTORS["uma"]}
    links = []
    for r in range(args.rounds):
        links.append(uma_link(torch, allocator, LINK_BYTES))
        for k in FACTORS["uma"]:
            one = {"budget_bytes": budgets[k]}
            configs[k].append(attempt(f"uma_{k}x", r, one, lambda: uma_round(
                uma_torch, torch, model, allocator, prefill, prompt, args, one)))
    result.update(weights_bytes=weight_bytes(model), planned_bytes=planned,
                  link_gbps=link_summary(links),
                  configs={f"uma_{k}x": dict(summarize(rounds), budget_bytes=budgets[k],
                                             first_round=rounds[0])
                           for k, rounds in configs.items()})


def uma_round(uma_torch, torch, model, allocator, prefill, prompt, args, one):
    """offload at one["budget_bytes"], measure, undo."""
    started = time.perf_counter()
    handle = uma_torch.offload(model, budget_bytes=one["budget_bytes"])
    one["offload_s"] = time.perf_counter() - started
    try:
        warm_up(torch, model, prefill, prompt)
        stats, forwards = allocator.stats(), handle.stats["forwards"]
        one["prefill_ms"] = prefill_ms(torch, model, prefill, args.prefill_repeats)
        one["exposed_prefill_ms"] = handle.exposed_transfer_ms()
        one["decode_ms"], one["tokens"] = decode(torch, model, prompt, args.decode_tokens)
        one["exposed_decode_ms"] = handle.exposed_transfer_ms()
        after = allocator.stats()
        forwards = handle.stats["forwards"] - forwards  # forwards that streamed a layer
        copied = after["copy_to_device_bytes"] - stats["copy_to_device_bytes"]
        one["copy_bytes_per_forward"] = copied / forwards if forwards else float(copied)
        one["offload_stats"] = dict(handle.stats)
        one["residency"] = allocator.residency()["devices"][0]
        one["tiers"] = {key: after[key] for key in ("host_tier_bytes", "device_tier_bytes")}
    finally:
        started = time.perf_counter()
        handle.undo()
        one["undo_s"] = time.perf_counter() - started


def accelerate_child(torch, args, result):
    import accelerate
    model = build(torch, args)
    weights = weight_bytes(model)
    layer_class = type(model.model.layers[0]).__name__
    model.to("cpu")
    torch.cuda.empty_cache()
    prefill, prompt = token_sets(torch, args)
    configs, links = {k: [] for k in FACTORS["accelerate"]}, []
    sizes = {name: sum(p.numel() * p.element_size() for p in module.parameters())
             for name, module in model.named_modules()}
    for r in range(args.rounds):
        links.append(torch_link(torch, LINK_BYTES))
        for k in FACTORS["accelerate"]:
            one = {"budget_bytes": math.ceil(weights / k)}
            configs[k].append(attempt(f"accelerate_{k}x", r, one, lambda: accelerate_round(
                torch, accelerate, model, layer_class, sizes, prefill, prompt, args, one)))
    result.update(weights_bytes=weights, link_gbps=link_summary(links),
                  accelerate=accelerate.__version__,
                  configs={f"accelerate_{k}x": dict(summarize(rounds),
                                                    budget_bytes=math.ceil(weights / k))
                           for k, rounds in configs.items()})


def accelerate_round(torch, accelerate, model, layer_class, sizes, prefill, prompt, args, one):
    """dispatch_model at one["budget_bytes"] of device memory (the rest offloaded to the CPU),
    measure, then the hooks removed (the offloaded weights back on the CPU) and the model moved
    back to the CPU."""
    from accelerate.hooks import remove_hook_from_submodules
    weights = sizes[""]
    torch.cuda.reset_peak_memory_stats()
    device_map = accelerate.infer_auto_device_map(
        model, max_memory={0: one["budget_bytes"], "cpu": 4 * weights},
        no_split_module_classes=[layer_class])
    accelerate.dispatch_model(model, device_map=device_map)
    try:
        one["copy_bytes_per_forward"] = sum(sizes.get(name, 0) for name, where in
                                            device_map.items() if where == "cpu")
        one["modules_on_cpu"] = sum(1 for where in device_map.values() if where == "cpu")
        one.update(measure(torch, model, prefill, prompt, args))
        one["memory_peak_bytes"] = torch.cuda.max_memory_allocated()
    finally:
        remove_hook_from_submodules(model)
        for name in ("to", "cuda"):  # dispatch_model's warning wrappers on the instance
            model.__dict__.pop(name, None)
        model.to("cpu")
        torch.cuda.empty_cache()


def install(variant, args):
    """uma_torch installed (before anything touches CUDA) for the uma variant, else None."""
    if variant != "uma":
        return None
    sys.path.insert(0, common.PYTHON_DIR)
    import uma_torch
    options = common.parse_uma_options(args.uma_option)
    options.setdefault("quota_bytes", args.quota_gib * GiB)
    uma_torch.install(common.require_library("uma"), **options)
    if not uma_torch.allocator().has_tiers():
        raise SystemExit(f"bench: {uma_torch.library_path()} has no host tier and uma_copy "
                         "(issue 39): offload() would not stream")
    return uma_torch


def child(args):
    variant = args.child
    if args.dry_run:
        common.emit({"variant": variant, "dry_run": True,
                     "library": common.library_path("uma") if variant == "uma" else None,
                     "configs": {name: {} for name in row_names([variant])}})
        return
    uma_torch = install(variant, args)
    import torch
    import transformers
    result = {"variant": variant, "device": torch.cuda.get_device_name(0),
              "torch": torch.__version__, "transformers": transformers.__version__}
    if variant == "native":
        native_child(torch, args, result)
    elif variant == "uma":
        uma_child(uma_torch, torch, args, result)
    else:
        accelerate_child(torch, args, result)
    common.emit(result)


# --- the report ---------------------------------------------------------------------------------

def factor_of(row):
    return 1 if row == "native" else int(row.rsplit("_", 1)[1][:-1])


def floors(rows, results):
    """{row: (prefill floor ms, decode floor ms/token, bytes a forward streams)}: the bytes
    uma's streamed layers hold at the row's budget (else W - W/k) over the link's host ->
    device speed (uma's, else native's), never below the native figure."""
    native = results.get("native", {}).get("configs", {}).get("native", {})
    uma = results.get("uma", {})
    link = (uma.get("link_gbps") or results.get("native", {}).get("link_gbps") or {}).get("h2d")
    weights = next((r["weights_bytes"] for r in results.values() if r.get("weights_bytes")),
                   None)
    out = {}
    for row in rows:
        k = factor_of(row)
        first = uma.get("configs", {}).get(f"uma_{k}x", {}).get("first_round", {})
        streamed = first.get("offload_stats", {}).get("streamed_bytes")
        if streamed is None and weights:
            streamed = weights - weights / k
        crossing = streamed / (link * 1e6) if link and streamed is not None else None
        limits = []
        for base in (native.get("prefill_ms"), native.get("decode_ms")):
            known = [f for f in (base, crossing) if f is not None]
            limits.append(max(known) if known else None)
        out[row] = (limits[0], limits[1], streamed)
    return out


def device_peak(row, config):
    """The device bytes at the peak: uma's residency report (its first round: see
    uma_child), else PyTorch's max_memory_allocated (median of the rounds)."""
    if row.startswith("uma"):
        return (config.get("first_round", {}).get("residency") or {}).get("peak_bytes")
    peaks = [r["memory_peak_bytes"] for r in config.get("rounds", [])
             if r.get("memory_peak_bytes") is not None]
    return statistics.median(peaks) if peaks else None


def pair(a, b, digits=2):
    return f"{common.fmt(a, digits)}/{common.fmt(b, digits)}"


def report(rows, results):
    configs = {}
    for result in results.values():
        configs.update(result.get("configs") or {})
    native = configs.get("native", {})
    limits = floors(rows, results)
    header = ["row", "prefill ms", "decode ms/tok", "x floor pre/dec", "x native pre/dec",
              "exposed ms pre/dec", "device peak/budget GiB", "copied GB/forward"]
    table = []
    for row in rows:
        c = configs.get(row, {})
        floor_pre, floor_dec, _ = limits.get(row, (None, None, None))
        pre, dec = c.get("prefill_ms"), c.get("decode_ms")
        peak, budget, copied = device_peak(row, c), c.get("budget_bytes"), \
            c.get("copy_bytes_per_forward")
        table.append([
            row, common.fmt(pre, 1), common.fmt(dec, 1),
            pair(common.ratio(pre, floor_pre), common.ratio(dec, floor_dec)),
            pair(common.ratio(pre, native.get("prefill_ms")),
                 common.ratio(dec, native.get("decode_ms"))),
            pair(c.get("exposed_prefill_ms"), c.get("exposed_decode_ms"), 1),
            pair(peak / GiB if peak else None, budget / GiB if budget else None),
            common.fmt(copied / 1e9 if copied is not None else None)])
    common.print_table(header, table)
    for row in rows:
        c = configs.get(row, {})
        rounds = c.get("rounds") or []
        if rounds:
            prefill = ', '.join(common.fmt(r.get('prefill_ms'), 1) for r in rounds)
            print(f"{row}: prefill rounds {prefill}; "
                  f"decode rounds {', '.join(common.fmt(r.get('decode_ms'), 1) for r in rounds)}")
        if native.get("tokens") and c.get("tokens") is not None and row != "native":
            same = c["tokens"] == native["tokens"] and c.get("same_tokens_every_round")
            print(f"{row}: generated tokens {'equal' if same else 'DIFFER FROM'} native's")
    for variant, result in results.items():
        if "error" in result:
            print(f"{variant}: FAILED: {result['error'].splitlines()[0]}")
        elif result.get("link_gbps"):
            link = result["link_gbps"]
            print(f"{variant}: link {link['h2d']:.1f} GB/s to the device, {link['d2h']:.1f} to "
                  f"the host (1 GiB, median of the rounds' best of 3)")
    weights = next((r["weights_bytes"] for r in results.values() if r.get("weights_bytes")),
                   None)
    link = next((r["link_gbps"]["h2d"] for r in results.values() if r.get("link_gbps")), None)
    for row, (floor_pre, floor_dec, streamed) in limits.items():
        if streamed:
            # The budget alone leaves W - budget to cross; uma's staging buffers come out of
            # the budget, so its layers stream more than that.
            least = weights - weights / factor_of(row) if weights else None
            physical = least / (link * 1e6) if least and link else None
            print(f"floor {row}: {streamed / 1e9:.2f} GB a forward: prefill "
                  f"{common.fmt(floor_pre, 1)} ms, decode {common.fmt(floor_dec, 1)} ms/token "
                  f"(W - budget = {common.fmt(least / 1e9 if least else None)} GB: "
                  f"{common.fmt(physical, 1)} ms)")


# --- the command line ----------------------------------------------------------------------------

def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="comma-separated, a process each (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds inside each process, its budgets interleaved (default 3)")
    parser.add_argument("--layers", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--intermediate", type=int, default=11008)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--prompt", type=int, default=1024, help="prefill tokens (batch 1)")
    parser.add_argument("--prefill-repeats", type=int, default=3)
    parser.add_argument("--decode-prompt", type=int, default=128)
    parser.add_argument("--decode-tokens", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quota-gib", type=int, default=16,
                        help="uma's quota (../shared/GPU.md: managed memory <= 16 GiB)")
    parser.add_argument("--uma-option", action="append", metavar="KEY=VALUE",
                        help="uma config for the uma variant (uma_c.CONFIG_FIELDS), repeatable")
    parser.add_argument("--json", metavar="PATH", help="also write every number here")
    parser.add_argument("--child-timeout", type=float, default=600.0, metavar="SECONDS")
    parser.add_argument("--dry-run", action="store_true",
                        help="run the subprocess plumbing without torch or a GPU")
    parser.add_argument("--child", metavar="VARIANT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if min(args.rounds, args.layers, args.hidden, args.intermediate, args.heads, args.vocab,
           args.prompt, args.prefill_repeats, args.decode_prompt, args.decode_tokens,
           args.quota_gib) < 1 or args.hidden % args.heads:
        parser.error("sizes must be positive and --hidden a multiple of --heads")
    return args


def main():
    args = arguments()
    if args.child:
        common.checked_allocators(args.child, VARIANTS)
        return child(args)
    variants = common.checked_allocators(args.variants, VARIANTS)
    if not args.dry_run and "uma" in variants:
        common.require_library("uma")
    results = common.run_children(os.path.abspath(__file__), variants, sys.argv[1:],
                                  args.child_timeout)
    rows = row_names(variants)
    weights = 2 * (args.vocab * args.hidden * 2 + args.layers * (
        4 * args.hidden ** 2 + 3 * args.hidden * args.intermediate + 2 * args.hidden)
        + args.hidden)
    print(f"\n== PyTorch inference beyond the budget: Llama {args.layers} layers x {args.hidden} "
          f"(intermediate {args.intermediate}, vocabulary {args.vocab}), bf16 weights "
          f"{weights / GiB:.2f} GiB; prefill 1 x {args.prompt}, decode {args.decode_tokens} "
          f"tokens after {args.decode_prompt}; {args.rounds} rounds; variants (a process each): "
          f"{', '.join(variants)}")
    report(rows, results)
    common.write_json(args.json, {"benchmark": "infer", "args": vars(args),
                                  "environment": common.environment_report(),
                                  "results": results})
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
