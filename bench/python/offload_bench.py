#!/usr/bin/env python3
"""Training beyond the device budget (issue 25): uma_torch.offload against the in-memory step
and a hand-written pinned-host offload, one fresh process per row, rows interleaved in rounds.

A GPT-2-shaped model written here in plain torch (token and position embeddings, N blocks of
causal attention + MLP with LayerNorm, the head tied to the token embedding; nothing
downloaded), AdamW with fp32 parameters, gradients and moments, bf16 autocast, random tokens
from a fixed seed. Persistent state S = parameters + gradients + two moments (16 bytes a
parameter). Step time = forward + backward + optimizer.step + zero_grad between two
synchronizes; median over --steps after --warmup. Rows:

  native      PyTorch's allocator, everything resident: the reference (also measures the link:
              a pinned copy of --link-mib each direction)
  uma_2x      uma_torch.install + offload(model, optimizer, budget_bytes=S/2)
  uma_3x      the same at S/3
  uma_2x_bw   offload(..., step_in_backward=True) at S/2: the optimizer steps during the
  uma_3x_bw   backward pass, gradients transient (docs/frameworks.md); and at S/3. Where the
              library has uma's tiers (issue 39) the state beyond the budget is in the host
              tier, copied through device staging slots by the copy engines (the row reports
              the bytes copied a step and the exposed transfer: how long the step streams
              waited for those copies); else mapped, as in the rows below
  uma_2x_bwmap  uma_2x_bw with the mapped state updated across the link (no staging copies)
  uma_2x_bwce   uma_2x_bw (and uma_3x_bwce: _3x_bw) with the mapped state staged through device
  uma_3x_bwce   buffers by cudaMemcpyAsync (copy_) around each chunk's step
  uma_2x_bwwhole  uma_2x_bw (uma_3x_bwwhole: _3x_bw) with slice_elements 0: a fused step over
  uma_3x_bwwhole  mapped state in the optimizer's own launches (backward_step.sliced), a foreach
                  step's staging copies in one launch a chunk
              (_bwmap, _bwce and _bwwhole rows measure the mapped state: never the host tier)
  pinned_2x   PyTorch's allocator; AdamW's moments in pinned host memory, copied in and out
              around the update in chunks through two device buffers with non-blocking copies
              on a side stream (the torchao CPU-offload shape); parameters and gradients stay
              resident: S/2 on the device
  uma         (optional) uma installed, no offload
  uma_fit     (optional) offload with a budget above S: what offload costs when all fits
A step_in_backward row (but _bwce and _bwwhole) may carry settings: ROW:chunk=MIB (offload's
chunk_bytes, the parameters stepped at once in the backward pass; default 64 MiB) and
ROW:slice=N (elements per launch of a fused step over mapped state, and of a foreach step's
staging copies; 0: one launch; default 512 Ki) and ROW:streams=1|2 (the step streams the
chunks alternate between; default 2) and ROW:tiers=0|1 (0: mapped state even where the library
has the host tier, the path before issue 39; default 1) and ROW:slots=N (the host tier's
staging slots, 2 to 8; default 2), e.g. uma_2x_bw:chunk=32:slice=1048576 or uma_2x_bw:tiers=0;
each such row is a row of its own in the rounds.
The physical floor per budget: max(native step, (S - budget) / link speed, each direction).

    UMA_BENCH_LIB_DIR=DIR python3 bench/python/offload_bench.py [--repeat 3] [--json out.json]
    python3 bench/python/offload_bench.py --smoke      # tiny model, 2 steps: the plumbing on GPU
    python3 bench/python/offload_bench.py --dry-run    # no torch, no GPU
"""

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ROWS = ("native", "uma_2x", "uma_3x", "uma_2x_bw", "uma_3x_bw", "uma_2x_bwmap", "uma_2x_bwce",
        "uma_3x_bwce", "uma_2x_bwwhole", "uma_3x_bwwhole", "pinned_2x", "uma", "uma_fit")
DEFAULT_ROWS = "native,uma_2x_bw,uma_3x_bw,pinned_2x,uma_2x"
FACTORS = {"uma_2x": 2, "uma_3x": 3, "uma_2x_bw": 2, "uma_3x_bw": 3, "uma_2x_bwmap": 2,
           "uma_2x_bwce": 2, "uma_3x_bwce": 3, "uma_2x_bwwhole": 2, "uma_3x_bwwhole": 3,
           "pinned_2x": 2, "uma_fit": 0.5}
GiB = 1 << 30
LR, BETAS, EPS, WD = 1e-4, (0.9, 0.999), 1e-8, 0.01


def parameter_count(args):
    """Parameters of the model below (the head is tied: no parameters of its own)."""
    d = args.width
    per_block = 12 * d * d + 13 * d  # qkv, proj, fc, fc2 with biases; two LayerNorms
    return args.vocab * d + args.seq * d + args.layers * per_block + 2 * d


def build(torch, args):
    """The model, on cuda, from a fixed seed."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = args.width
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (y.view(b, t, args.heads, d // args.heads).transpose(1, 2)
                       for y in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(args.vocab, args.width)
            self.wpe = nn.Embedding(args.seq, args.width)
            self.blocks = nn.ModuleList([Block() for _ in range(args.layers)])
            self.ln_f = nn.LayerNorm(args.width)
            self.head = nn.Linear(args.width, args.vocab, bias=False)
            self.head.weight = self.wte.weight

        def forward(self, tokens):
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.wte(tokens) + self.wpe(positions)
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits[:, :-1].reshape(-1, args.vocab),  # fp32 by autocast
                                   tokens[:, 1:].reshape(-1))

    torch.manual_seed(args.seed)
    return GPT().cuda().train()


def batches(torch, args):
    """The same random tokens in every row: one CPU generator from the seed."""
    generator = torch.Generator().manual_seed(args.seed)
    count = args.warmup + args.steps
    return [torch.randint(0, args.vocab, (args.batch, args.seq), generator=generator)
            for _ in range(count)]


def link_speed(torch, mib):
    """GB/s of a pinned host <-> device copy of `mib` MiB each way (best of three)."""
    host = torch.empty(mib << 20, dtype=torch.uint8, pin_memory=True)
    device = torch.empty(mib << 20, dtype=torch.uint8, device="cuda")
    out = {}
    for name, (dst, src) in {"h2d": (device, host), "d2h": (host, device)}.items():
        best = 0.0
        for _ in range(3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src, non_blocking=True)
            end.record()
            end.synchronize()
            best = max(best, (mib << 20) / (start.elapsed_time(end) * 1e-3) / 1e9)
        out[name] = best
    del host, device
    return out


class PinnedAdamW:
    """AdamW with its moments in pinned host memory: per chunk of parameters, the moments copied
    into one of two device buffers on a side stream, updated there (foreach AdamW math, the
    same as torch.optim.AdamW's), copied back on the side stream; the next chunk's copy in
    overlaps this chunk's update."""

    def __init__(self, torch, params, chunk_bytes):
        self.torch, self.params, self.t = torch, [p for p in params if p.requires_grad], 0
        self.chunks, current, size = [], [], 0
        for p in self.params:
            nbytes = 2 * p.numel() * p.element_size()
            if current and size + nbytes > chunk_bytes:
                self.chunks.append(current)
                current, size = [], 0
            current.append(p)
            size += nbytes
        self.chunks.append(current)
        largest = max(sum(p.numel() for p in chunk) for chunk in self.chunks)  # per moment
        self.host = {p: torch.zeros(2, p.numel(), pin_memory=True) for p in self.params}
        self.buffers = [torch.empty(2 * largest, device="cuda") for _ in range(2)]
        self.side = torch.cuda.Stream()
        self.free = [torch.cuda.Event(), torch.cuda.Event()]
        self.moved_bytes = sum(self.host[p].numel() * 4 for p in self.params)  # each way

    def _copy_in(self, k):
        torch, buffer = self.torch, self.buffers[k % 2]
        views, offset = [], 0
        with torch.cuda.stream(self.side):
            self.side.wait_event(self.free[k % 2])
            for p in self.chunks[k]:  # [m | v] of each parameter, contiguous
                n = p.numel()
                view = buffer[offset:offset + 2 * n].view(2, n)
                view.copy_(self.host[p], non_blocking=True)
                views.append(view)
                offset += 2 * n
            ready = torch.cuda.Event()
            ready.record(self.side)
        return views, ready

    def step(self):
        with self.torch.no_grad():  # in-place updates of leaf parameters
            self._step()

    def _step(self):
        torch = self.torch
        self.t += 1
        bc1, bc2 = 1 - BETAS[0] ** self.t, 1 - BETAS[1] ** self.t
        self.side.wait_stream(torch.cuda.current_stream())  # the gradients are ready
        pending = self._copy_in(0)
        for k, chunk in enumerate(self.chunks):
            views, ready = pending
            if k + 1 < len(self.chunks):
                pending = self._copy_in(k + 1)
            torch.cuda.current_stream().wait_event(ready)
            params = [p for p in chunk if p.grad is not None]
            pairs = [(v, p) for v, p in zip(views, chunk) if p.grad is not None]
            m = [v[0].view_as(p) for v, p in pairs]
            s = [v[1].view_as(p) for v, p in pairs]
            grads = [p.grad for p in params]
            torch._foreach_mul_(params, 1 - LR * WD)
            torch._foreach_lerp_(m, grads, 1 - BETAS[0])
            torch._foreach_mul_(s, BETAS[1])
            torch._foreach_addcmul_(s, grads, grads, value=1 - BETAS[1])
            denom = torch._foreach_sqrt(s)
            torch._foreach_div_(denom, math.sqrt(bc2))
            torch._foreach_add_(denom, EPS)
            torch._foreach_addcdiv_(params, m, denom, value=-LR / bc1)
            done = torch.cuda.Event()
            done.record()
            with torch.cuda.stream(self.side):
                self.side.wait_event(done)
                for v, p in zip(views, chunk):
                    self.host[p].copy_(v, non_blocking=True)
                self.free[k % 2].record(self.side)
        torch.cuda.current_stream().wait_stream(self.side)

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None


def install(row, args):
    """PyTorch's allocator for the row (before anything touches CUDA); uma_torch or None."""
    if not row.startswith("uma"):
        return None
    sys.path.insert(0, common.PYTHON_DIR)
    import uma_torch
    options = common.parse_uma_options(args.uma_option)
    options.setdefault("quota_bytes", args.quota_gib * GiB)
    options.setdefault("driver_counters", 1)  # the ledger's fault figures (the 1 % target)
    uma_torch.install(common.require_library("uma"), **options)
    return uma_torch


def residency(uma_torch):
    if uma_torch is None:
        return None
    try:
        return uma_torch.residency()
    except Exception as error:  # a library without the plan calls: say so in the row
        return {"error": str(error)}


def delta(after, before, keys):
    if not after or not before or "error" in after or "error" in before:
        return None
    return {key: after[key] - before[key] for key in keys}


PHASES = ("forward", "backward", "step")


def run_steps(torch, model, optimizer, data, args, phases=None):
    """(step ms after args.warmup steps, every step's loss); `phases` (a list) gets one
    {"gpu_PHASE"/"host_PHASE": ms} a timed step: the device's time between events recorded on
    the compute stream after each phase, and the host's time until the phase's call returned.
    A device phase longer than its host phase waits for the device (its kernels, or a stream it
    waits for); a host phase as long as its device phase means the kernels waited for the
    host."""
    losses, samples = [], []
    for i, tokens in enumerate(data):
        tokens = tokens.cuda(non_blocking=True)
        torch.cuda.synchronize()
        marks = [(time.perf_counter(), _event(torch))]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(tokens)
        marks.append((time.perf_counter(), _event(torch)))
        loss.backward()
        marks.append((time.perf_counter(), _event(torch)))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        marks.append((time.perf_counter(), _event(torch)))
        torch.cuda.synchronize()
        if i >= args.warmup:
            samples.append((time.perf_counter() - marks[0][0]) * 1e3)
            if phases is not None:
                phases.append({f"{where}_{phase}": ms for phase, (a, b) in
                               zip(PHASES, zip(marks, marks[1:])) for where, ms in
                               (("gpu", a[1].elapsed_time(b[1])), ("host", (b[0] - a[0]) * 1e3))})
        losses.append(loss.detach())
    return samples, [float(loss) for loss in losses]


def _event(torch):
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


ROW_SETTINGS = {"chunk": (1, None), "slice": (0, None), "streams": (1, 2), "tiers": (0, 1),
                "slots": (2, 8)}  # (least, most)


def row_settings(name):
    """(the row, {setting: int}) of a row name with settings (ROW:chunk=64:slice=262144);
    raises SystemExit naming what is wrong."""
    row, *parts = name.split(":")
    if parts and ("_bw" not in row or row.endswith(("_bwce", "_bwwhole"))):
        raise SystemExit(f"bench: row {name!r}: settings are for step_in_backward rows other "
                         f"than _bwce and _bwwhole (which set their own staging and launches)")
    settings = {}
    for part in parts:
        key, _, value = part.partition("=")
        least, most = ROW_SETTINGS.get(key, (None, None))
        if least is None or not (value.isascii() and value.isdigit()) or \
                int(value) < least or (most is not None and int(value) > most):
            raise SystemExit(f"bench: row {name!r}: {part!r} is not a setting (chunk=MIB >= 1, "
                             f"slice=ELEMENTS >= 0, streams=1 or 2, tiers=0 or 1, "
                             f"slots=2 to 8)")
        if key in settings:
            raise SystemExit(f"bench: row {name!r}: {key} given twice")
        settings[key] = int(value)
    return row, settings


def checked_rows(text):
    """The row names of a comma-separated list, each a known row with valid settings."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    common.checked_allocators(",".join(row_settings(n)[0] for n in names), ROWS)
    return names


HOOK_PHASES = ("forward", "backward", "gradient")


def hook_seconds(handle):
    """{phase: seconds} the offload's hooks took on the host so far (handle.stats)."""
    return {phase: handle.stats[f"{phase}_hook_seconds"] if handle else 0.0
            for phase in HOOK_PHASES}


def host_tier(handle):
    """{figure: total so far} of a step_in_backward offload's host tier (copies each way,
    chunks streamed, the step streams' wait for the copies in ms); None without the tier."""
    step = handle.backward_step if handle is not None else None
    if step is None or step.tier is None:
        return None
    return {"copied_to_device_bytes": step.stats["copied_to_device_bytes"],
            "copied_to_host_bytes": step.stats["copied_to_host_bytes"],
            "streamed_chunks": step.stats["streamed_chunks"],
            "filled_on_demand_chunks": step.stats["filled_on_demand_chunks"],
            "exposed_transfer_ms": step.exposed_transfer_ms()}


LEDGER = ("to_device_bytes", "to_host_bytes", "dropped_bytes", "discarded_bytes",
          "driver_to_device_bytes", "driver_to_host_bytes", "driver_page_faults",
          "driver_fault_to_device_bytes", "driver_fault_to_host_bytes")


def child(args):
    row = args.child
    if args.dry_run:
        common.emit({"allocator": row, "dry_run": True, "step_ms": None,
                     "library": common.library_path("uma") if row.startswith("uma") else None})
        return
    uma_torch = install(row, args)
    import torch
    model = build(torch, args)
    state = 16 * sum(p.numel() for p in model.parameters())
    row, settings = row_settings(row)
    budget = int(state / FACTORS[row]) if row in FACTORS else None
    result = {"allocator": args.child, "state_bytes": state, "budget_bytes": budget,
              "tokens_per_step": args.batch * args.seq}
    if row == "native":
        result["link_gbps"] = link_speed(torch, args.link_mib)
    if row == "pinned_2x":
        optimizer = PinnedAdamW(torch, model.parameters(), args.pinned_chunk_mib << 20)
        result["moved_bytes_per_step"] = {"to_device": optimizer.moved_bytes,
                                          "to_host": optimizer.moved_bytes}
    else:
        # --fused: one kernel reads and writes each moment once (foreach: several passes,
        # each across the link where the moments are mapped); the native row uses it too.
        optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                                      weight_decay=WD, fused=True if args.fused else None)
    handle = None
    if row in FACTORS and row.startswith("uma"):
        from uma_torch.backward_step import BackwardStep  # read when the offload starts
        BackwardStep.staging_slots = settings.get("slots", BackwardStep.staging_slots)
        tiered = "_bw" in row and settings.get("tiers", 0) == 1 and \
            not row.endswith(("_bwmap", "_bwce", "_bwwhole"))
        handle = uma_torch.offload(model, optimizer, budget_bytes=budget, policy=args.policy,
                                   lookahead=args.lookahead, step_in_backward="_bw" in row,
                                   state_tier=tiered and uma_torch.allocator().has_tiers(),
                                   chunk_bytes=settings["chunk"] << 20
                                   if "chunk" in settings else None)
        if row.endswith("_bwmap"):
            handle.backward_step.stage = False
        if row.endswith("_bwce"):  # staged through device buffers by cudaMemcpyAsync
            handle.backward_step.stage = handle.backward_step.memcpy_staging = True
        if row.endswith("_bwwhole"):  # the fused step in the optimizer's own launches
            handle.backward_step.slice_elements = 0
        elif handle.backward_step is not None and "slice" in settings:
            handle.backward_step.slice_elements = settings["slice"]
        elif handle.backward_step is not None and args.slice_elements is not None:
            handle.backward_step.slice_elements = args.slice_elements
        if "streams" in settings:
            handle.backward_step.step_streams = settings["streams"]
    data = batches(torch, args)
    before = residency(uma_torch)
    samples, losses = run_steps(torch, model, optimizer, data[:args.warmup], args) \
        if args.warmup else ([], [])
    middle = residency(uma_torch)
    hooks_before = hook_seconds(handle)
    tier_before = host_tier(handle)
    phases = []
    timed, timed_losses = run_steps(torch, model, optimizer, data[args.warmup:],
                                    argparse.Namespace(warmup=0), phases)
    result["phase_ms"] = {key: common.summary([p[key] for p in phases])["median"]
                          for key in phases[0]} if phases else {}
    if tier_before is not None:
        result["host_tier_per_step"] = {key: (value - tier_before[key]) / len(timed)
                                        for key, value in host_tier(handle).items()}
    if handle is not None:
        result["hook_ms_per_step"] = {
            phase: (hook_seconds(handle)[phase] - hooks_before[phase]) * 1e3 / len(timed)
            for phase in HOOK_PHASES}
    after = residency(uma_torch)
    if args.trace_dir:
        result["trace"] = traced_step(torch, model, optimizer, data[-1], args, args.child)
    moved = delta(after, middle, LEDGER)
    if moved:
        result["moved_bytes_per_step"] = {k: v / len(timed) for k, v in moved.items()}
    result.update(step_ms=common.summary(timed)["median"], summary=common.summary(timed),
                  samples_ms=timed, losses=losses + timed_losses, residency=after,
                  residency_warmup=delta(middle, before, LEDGER),
                  device=torch.cuda.get_device_name(0), torch=torch.__version__)
    if handle is not None:
        result["offload_stats"] = dict(handle.stats, static=handle.static)
        if handle.backward_step is not None:
            result["offload_stats"].update(handle.backward_step.stats)
        handle.undo()
    if uma_torch is not None:
        result["uma_stats"] = uma_torch.stats()
        # every byte uma held at once (slabs and cached blocks included): state + activations
        result["memory_peak_bytes"] = result["uma_stats"]["peak_bytes"]
    else:
        result["memory_peak_bytes"] = torch.cuda.max_memory_allocated()
    common.emit(result)


def traced_step(torch, model, optimizer, tokens, args, row):
    """One more step under torch.profiler: its chrome trace (gzipped) in --trace-dir, and the
    per-stream summary of its GPU events (stream_summary)."""
    import gzip
    import json
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run_steps(torch, model, optimizer, [tokens], argparse.Namespace(warmup=0))
    os.makedirs(args.trace_dir, exist_ok=True)
    path = os.path.join(args.trace_dir, f"{row}.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as f:
        raw = f.read()
    with gzip.open(path + ".gz", "wb") as out:
        out.write(raw)
    os.remove(path)
    return stream_summary(json.loads(raw).get("traceEvents", []))


def stream_summary(trace_events):
    """Per CUDA stream: when its first kernel or copy started and its last ended (ms from the
    first GPU event), its busy time and its four busiest kernels: where a step's time goes."""
    events = [e for e in trace_events
              if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]
    if not events:
        return {}
    origin = min(e["ts"] for e in events)
    streams = {}
    for e in events:
        s = streams.setdefault(str(e.get("args", {}).get("stream")),
                               {"first_ms": 1e18, "last_ms": 0.0, "busy_ms": 0.0, "kernels": {}})
        start, dur = (e["ts"] - origin) / 1e3, e["dur"] / 1e3
        s["first_ms"], s["last_ms"] = min(s["first_ms"], start), max(s["last_ms"], start + dur)
        s["busy_ms"] += dur
        name = e["name"][:60]
        s["kernels"][name] = s["kernels"].get(name, 0.0) + dur
    for s in streams.values():
        top = sorted(s["kernels"].items(), key=lambda kv: -kv[1])[:4]
        s["kernels"] = {k: round(v, 2) for k, v in top}
        s.update({k: round(s[k], 2) for k in ("first_ms", "last_ms", "busy_ms")})
    return streams


def floors(results, names):
    """{budget factor: floor ms}: max(native step, bytes that must cross / link, each way)."""
    native = results.get("native", {})
    step, link, state = native.get("step_ms"), native.get("link_gbps"), native.get("state_bytes")
    if not step or not link or not state:
        return {}
    out = {}
    bases = [row_settings(n)[0] for n in names]
    for factor in sorted({FACTORS[n] for n in bases if n in FACTORS and FACTORS[n] >= 1}):
        crossing = state - state / factor
        out[factor] = max(step, crossing / (link["h2d"] * 1e6), crossing / (link["d2h"] * 1e6))
    return out


def beside(r):
    """GiB beside the persistent state at the memory peak: activations, workspaces and (uma
    rows) cached free blocks. uma's peak counts every managed byte wherever it is resident, so
    the whole state is subtracted; the pinned row holds parameters and gradients (S/2) on the
    device and the moments in host memory."""
    peak, state = r.get("memory_peak_bytes"), r.get("state_bytes")
    if peak is None or not state:
        return None
    held = state / 2 if r["allocator"] == "pinned_2x" else state
    return max(peak - held, 0) / GiB


def report(names, results):
    baseline = results.get("native", {}).get("step_ms")
    limits = floors(results, names)
    header = ["row", "step ms (median)", "x native", "x floor", "budget GiB", "peak GiB",
              "beside it GiB",
              "moved in/out MB/step", "driver faults in/out MB/step", "loss max |diff|"]
    native_losses = results.get("native", {}).get("losses")
    rows = []
    for name in names:
        r = results[name]
        factor = FACTORS.get(row_settings(name)[0])
        budget, peak = r.get("budget_bytes"), None
        devices = (r.get("residency") or {}).get("devices") or []
        if devices:
            peak = devices[0].get("peak_bytes")
        moved = r.get("moved_bytes_per_step") or {}
        to_dev = moved.get("to_device_bytes", moved.get("to_device"))
        to_host = moved.get("to_host_bytes", moved.get("to_host"))
        diff = None
        if native_losses and r.get("losses") and len(r["losses"]) == len(native_losses):
            diff = max(abs(a - b) for a, b in zip(r["losses"], native_losses))
        rows.append([
            name, common.fmt(r.get("step_ms")),
            common.fmt(common.ratio(r.get("step_ms"), baseline), 3),
            common.fmt(common.ratio(r.get("step_ms"), limits.get(factor)), 3),
            common.fmt(budget / GiB if budget else None, 2),
            common.fmt(peak / GiB if peak is not None else None, 2),
            common.fmt(beside(r), 2),
            "-" if to_dev is None else f"{to_dev / 1e6:.0f}/{to_host / 1e6:.0f}",
            "-" if "driver_fault_to_device_bytes" not in moved else
            f"{moved['driver_fault_to_device_bytes'] / 1e6:.0f}/"
            f"{moved['driver_fault_to_host_bytes'] / 1e6:.0f}",
            common.fmt(diff, 4)])
    common.print_table(header, rows)
    common.print_rounds(names, results)
    native = results.get("native", {})
    if native.get("link_gbps"):
        link = native["link_gbps"]
        print(f"link (pinned copy, this run): {link['h2d']:.1f} GB/s to the device, "
              f"{link['d2h']:.1f} GB/s to the host; state {native['state_bytes'] / GiB:.2f} GiB, "
              f"tokens/step {native['tokens_per_step']}")
    for factor, floor in limits.items():
        print(f"physical floor at {factor}x: {floor:.1f} ms")
    pinned = results.get("pinned_2x", {}).get("step_ms")
    for name in ("uma_2x", "uma_2x_bw"):
        uma = results.get(name, {}).get("step_ms")
        if pinned and uma:
            print(f"pinned_2x / {name} step time: {pinned / uma:.2f} (issue 25's target: "
                  ">= 1.5)")
    for name in names:
        r = results[name]
        if "error" in r:
            print(f"{name}: FAILED: {r['error'].splitlines()[0]}")
        elif r.get("residency"):
            res = r["residency"]
            print(f"{name}: residency {res if 'error' in res else _residency_line(res)}")
        if r.get("offload_stats"):
            print(f"{name}: offload {r['offload_stats']}")
        if r.get("phase_ms"):
            print(f"{name}: phases (medians, ms), device/host: " + ", ".join(
                f"{phase} {r['phase_ms'][f'gpu_{phase}']:.2f}/{r['phase_ms'][f'host_{phase}']:.2f}"
                for phase in PHASES))
        if r.get("host_tier_per_step"):
            t = r["host_tier_per_step"]
            print(f"{name}: host tier a step: copied in/out "
                  f"{t['copied_to_device_bytes'] / 1e6:.0f}/{t['copied_to_host_bytes'] / 1e6:.0f} "
                  f"MB in {t['streamed_chunks']:.1f} chunks ({t['filled_on_demand_chunks']:.1f} "
                  f"not filled ahead), exposed transfer {t['exposed_transfer_ms']:.2f} ms "
                  f"(staging {r['offload_stats'].get('staging_bytes', 0) / GiB:.2f} GiB)")
        if r.get("hook_ms_per_step"):
            print(f"{name}: host ms a step in offload's hooks: " + ", ".join(
                f"{phase} {ms:.2f}" for phase, ms in r["hook_ms_per_step"].items()))
        for stream, t in (r.get("trace") or {}).items():
            print(f"{name}: trace stream {stream}: {t['first_ms']:.1f}-{t['last_ms']:.1f} ms, "
                  f"busy {t['busy_ms']:.1f} ms; {t['kernels']}")
        if r.get("losses"):
            print(f"{name}: losses {', '.join(f'{x:.4f}' for x in r['losses'])}")


def _residency_line(res):
    device = res["devices"][0] if res.get("devices") else {}
    budget, peak = device.get("budget_bytes", 0), device.get("peak_bytes", 0)
    honest = "no budget" if not budget else \
        "within the budget" if peak <= budget else "OVER the budget"
    return (f"budget {budget / GiB:.2f} GiB, peak {peak / GiB:.2f} GiB ({honest}), "
            f"moves in/out "
            f"{res['to_device_bytes'] / 1e9:.2f}/{res['to_host_bytes'] / 1e9:.2f} GB, dropped "
            f"{res['dropped_bytes'] / 1e9:.2f} GB, discarded {res['discarded_bytes'] / 1e9:.2f} "
            f"GB, refetches {res['refetches']}, driver counters "
            f"{'on' if res['driver_counters_on'] else 'off'}: in/out "
            f"{res['driver_to_device_bytes'] / 1e9:.2f}/{res['driver_to_host_bytes'] / 1e9:.2f} "
            f"GB (on its own: {res.get('driver_fault_to_device_bytes', 0) / 1e9:.2f}/"
            f"{res.get('driver_fault_to_host_bytes', 0) / 1e9:.2f} GB), faults "
            f"{res['driver_page_faults']}, unplanned {res['unplanned_bytes'] / GiB:.2f} GiB")


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser, ROWS)
    parser.set_defaults(allocators=DEFAULT_ROWS, repeat=3, child_timeout=600.0)
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny model, 2 steps, 1 round: the plumbing on the GPU machine")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=50304)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", default="auto", help="offload's policy (default auto)")
    parser.add_argument("--fused", action="store_true",
                        help="torch.optim.AdamW(fused=True) for the native and uma rows")
    parser.add_argument("--lookahead", type=int, default=1)
    parser.add_argument("--link-mib", type=int, default=1024)
    parser.add_argument("--pinned-chunk-mib", type=int, default=64)
    parser.add_argument("--slice-elements", type=int, metavar="N",
                        help="step_in_backward rows without a slice= setting: elements per "
                             "launch over mapped state (default: uma_torch's, 512 Ki)")
    parser.add_argument("--trace-dir", metavar="DIR",
                        help="one more step per row under torch.profiler: its trace here, a "
                             "per-stream summary in the report")
    parser.add_argument("--quota-gib", type=int, default=16,
                        help="uma's quota for the uma rows (../shared/GPU.md: total <= 16 GiB)")
    args = parser.parse_args()
    if args.smoke:
        args.layers, args.width, args.heads, args.vocab = 2, 128, 4, 1024
        args.batch, args.seq, args.steps, args.warmup, args.repeat = 2, 64, 2, 1, 1
        args.link_mib = 64
    if args.slice_elements is not None and args.slice_elements < 0:
        parser.error("--slice-elements must be 0 (the optimizer's own launches) or more")
    if min(args.steps, args.layers, args.width, args.heads, args.batch, args.seq, args.vocab,
           args.link_mib, args.pinned_chunk_mib, args.quota_gib) < 1 or args.warmup < 0 \
            or args.width % args.heads:
        parser.error("sizes must be positive and --width a multiple of --heads")
    return args


def main():
    args = arguments()
    if args.child:
        checked_rows(args.child)
        return child(args)
    names = checked_rows(args.allocators)
    names, results = common.collect(__file__, names, args, lambda r: r.get("step_ms"))
    state = 16 * parameter_count(args)
    print(f"\n== PyTorch offload: GPT-2 {args.layers} layers x {args.width}, batch {args.batch} x "
          f"{args.seq} ({args.batch * args.seq} tokens/step), AdamW fp32, bf16 autocast; "
          f"state {state / GiB:.2f} GiB; rows (allocator per process): {', '.join(names)}")
    report(names, results)
    common.write_json(args.json, {"benchmark": "offload", "args": vars(args),
                                  "environment": common.environment_report(),
                                  "results": results})
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
