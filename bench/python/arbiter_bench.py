#!/usr/bin/env python3
"""One GPU, many processes under one `uma serve` with an arbiter (issue 37; docs/distributed.md
"One GPU, many processes"): an inference process (a GPT-2-shaped transformer from its config,
decoding at a fixed batch) with priority, and a training process (a GPT-2-shaped model with
AdamW) that wants more than the rest of the budget. Both run under uma_torch.install() and join
the node's arbiter; the budgets emulate a smaller device (the sum of managed allocations stays
far below the card's free memory, ../shared/GPU.md).

Rows (defaults in brackets; GB = 10^9 bytes):
  * each alone with the whole budget [32 GB];
  * both at once with static halves (each tenant's minimum and want are half the total);
  * both under the arbiter: the inference process with priority 10 and a guaranteed 6 GB; the
    trainer (its model state and activations take about 21 GB) wants 12 GB, so it spills the
    rest to the host, then asks for 20 GB more half way (it is granted what the inference
    process leaves: 26 GB), and the inference process is SIGKILLed: the time until the trainer
    is granted its bytes;
  * a move: the trainer holds a smaller budget whole [24 GB], the inference process joins with
    priority wanting 14 GB, and the trainer must evict (contents kept) before the bytes are
    granted: the arbiter's ledger times it against B / 45 GB/s + 50 ms.

    UMA_LIBRARY=.../libuma_c.so python3 bench/python/arbiter_bench.py --uma-bin .../uma \
        [--total-gb 32] [--seconds 20] [--json out.json]

Prints each row's throughputs, the ratios against the isolated rows of the same run, the moves'
times against the target (B / 45 GB/s + 50 ms), the regrant time after the kill and whether any
process ran out of memory; the arbiter's report (its ledger) is appended to the JSON.
"""

import argparse
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
GB = 10**9
WARM_S = 15  # the inference process's first seconds fault its memory in: not measured


# -- the worker processes -----------------------------------------------------------------------

def emit(**fields):
    fields["t"] = time.time()
    print(json.dumps(fields), flush=True)


def join(args, name, min_bytes, wanted):
    import uma_torch
    member = uma_torch.join_arbiter(args.target, name, device=0, min_bytes=min_bytes,
                                    wanted_bytes=wanted, priority=args.priority)
    emit(event="joined", budget=member.budget(0))
    return member


def watch(member):
    """Emits the budget whenever it changes (polled every 10 ms on a thread of its own, so the
    times do not wait for a step to end)."""
    import threading

    def loop():
        last = member.budget(0)
        while True:
            time.sleep(0.01)
            try:
                now = member.budget(0)
            except Exception:  # the member left: the process ends
                return
            if now != last:
                emit(event="budget", budget=now)
                last = now
    threading.Thread(target=loop, daemon=True).start()


def ask_later(member, args):
    """Asks for ask_more_bytes more after ask_more_after seconds (a timer: steps may be long)."""
    import threading
    if not args.ask_more_after:
        return

    def ask():
        member.want(args.wanted_bytes + args.ask_more_bytes, device=0)
        emit(event="asked", wanted=args.wanted_bytes + args.ask_more_bytes)
    threading.Timer(args.ask_more_after, ask).start()


def infer_worker(args):
    import torch
    import uma_torch
    from transformers import GPT2Config, GPT2LMHeadModel
    uma_torch.install()
    member = join(args, "infer", args.min_bytes, args.wanted_bytes)
    config = GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=args.width // 128,
                        n_positions=4096, vocab_size=32000)
    model = GPT2LMHeadModel(config).half().cuda().eval()
    tokens = torch.randint(0, 32000, (args.batch, 1), device="cuda")
    emit(event="ready")
    watch(member)
    past, start = None, time.time()
    with torch.no_grad():
        while time.time() - start < args.seconds:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(16):
                out = model(input_ids=tokens, past_key_values=past, use_cache=True)
                past = out.past_key_values
                tokens = out.logits[:, -1:].argmax(-1)
                if past.get_seq_length() >= 512:
                    past = None
            torch.cuda.synchronize()
            emit(event="step", tokens=16 * args.batch, ms=(time.perf_counter() - t0) * 1e3)
    emit(event="done", spilled=uma_torch.spilled_bytes())


def train_worker(args):
    import torch
    import uma_torch
    from transformers import GPT2Config, GPT2LMHeadModel
    uma_torch.install()
    member = join(args, "train", args.min_bytes, args.wanted_bytes)
    config = GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=args.width // 128,
                        n_positions=1024, vocab_size=32000)
    model = GPT2LMHeadModel(config).cuda().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    data = torch.randint(0, 32000, (args.batch, 512), device="cuda")
    emit(event="ready")
    watch(member)
    ask_later(member, args)
    start = time.time()
    while time.time() - start < args.seconds:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(input_ids=data, labels=data).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        emit(event="step", ms=(time.perf_counter() - t0) * 1e3, loss=float(loss.detach()),
             spilled=uma_torch.spilled_bytes())
    emit(event="done", spilled=uma_torch.spilled_bytes())


def dry_worker(args):
    """--dry-run: the plumbing without torch or a GPU: a host-backend uma_c allocator joins and
    "steps" are short sleeps, so the orchestration, the node and the ledger can be checked here."""
    import uma_c
    allocator = uma_c.Allocator.create(backend="host")
    member = allocator.join_arbiter(args.target, args.worker, min_bytes=args.min_bytes,
                                    wanted_bytes=args.wanted_bytes, priority=args.priority)
    emit(event="joined", budget=member.budget(0))
    emit(event="ready")
    watch(member)
    ask_later(member, args)
    start = time.time()
    while time.time() - start < args.seconds:
        time.sleep(0.01)
        emit(event="step", ms=10.0, tokens=1, spilled=0)
    emit(event="done", spilled=0)


def worker_main(args):
    try:
        if args.dry_run:
            return dry_worker(args)
        (infer_worker if args.worker == "infer" else train_worker)(args)
    except Exception as error:  # an out-of-memory error is a result, not a crash of the bench
        emit(event="error", error=f"{type(error).__name__}: {str(error).splitlines()[0][:300]}",
             oom="out of memory" in str(error).lower())
        sys.exit(1)


# -- the orchestration ---------------------------------------------------------------------------

class Node:
    """`uma serve` with an arbiter on a private socket."""

    def __init__(self, uma_bin, folder, total, policies, deadline_ms=20000, dry=False):
        self.socket = os.path.join(folder, "uma.sock")
        argv = [uma_bin, "serve", "--socket", self.socket, "--arbiter-total", f"0:{total}",
                "--arbiter-deadline", str(deadline_ms), "--backend", "host" if dry else "cuda"]
        for p in policies:
            argv += ["--arbiter-policy", p]
        self.log = open(os.path.join(folder, "serve.log"), "a")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True)
        first = self.proc.stdout.readline()
        if "listening" not in first:
            raise SystemExit(f"uma serve did not start: {first!r} (see {self.log.name})")
        self.target = "unix:" + self.socket
        self.uma_bin = uma_bin

    def report(self):
        done = subprocess.run([self.uma_bin, "budgets", "--connect", self.target + ".operator",
                               "--json"], capture_output=True, text=True, timeout=30)
        return json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr}

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class Worker:
    def __init__(self, args, node, kind, min_bytes, wanted, priority, seconds, extra=()):
        shape = args.infer_shape if kind == "infer" else args.train_shape
        layers, width, batch = (int(x) for x in shape.split("x"))
        argv = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--target",
                node.target, "--min-bytes", str(min_bytes), "--wanted-bytes", str(wanted),
                "--priority", str(priority), "--seconds", str(seconds), "--layers", str(layers),
                "--width", str(width), "--batch", str(batch), *extra]
        if args.dry_run:
            argv += ["--dry-run"]
        self.kind = kind
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.events = []

    def poll(self, timeout=0.05):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        while ready:
            line = self.proc.stdout.readline()
            if not line:
                return
            try:
                self.events.append(json.loads(line))
            except json.JSONDecodeError:
                pass
            ready, _, _ = select.select([self.proc.stdout], [], [], 0)

    def seen(self, event):
        return any(e["event"] == event for e in self.events)

    def wait_for(self, event, timeout=300):
        end = time.time() + timeout
        while time.time() < end and not self.seen(event) and self.proc.poll() is None:
            self.poll(0.1)
        self.poll(0)
        return self.seen(event)

    def finish(self, timeout=600):
        end = time.time() + timeout
        while self.proc.poll() is None and time.time() < end:
            self.poll(0.2)
        self.poll(0)
        if self.proc.poll() is None:
            self.proc.kill()

    def throughput(self, since=None, until=None):
        steps = [e for e in self.events if e["event"] == "step" and
                 (since is None or e["t"] >= since) and (until is None or e["t"] <= until)]
        steps = steps[2:] if since is None else steps  # the first steps warm up
        if not steps:
            return None
        if self.kind == "infer":
            return statistics.median(s["tokens"] / s["ms"] * 1e3 for s in steps)
        return statistics.median(1e3 / s["ms"] for s in steps)

    def oom(self):
        return any(e["event"] == "error" and e.get("oom") for e in self.events)

    def errors(self):
        return [e["error"] for e in self.events if e["event"] == "error"]


def run_until_done(*workers):
    while any(w.proc.poll() is None for w in workers):
        for w in workers:
            w.poll(0.05)
    for w in workers:
        w.finish()


def budget_times(worker):
    return [(e["t"], e["budget"]) for e in worker.events if e["event"] in ("joined", "budget")]


def decisions(report):
    return report.get("decisions", []) if isinstance(report, dict) else []


def policy(kind, min_bytes, priority):
    return f"uid {os.getuid()}/{kind}:0:{min_bytes}:{priority}:1"


def node(args, folder, total, policies):
    return Node(args.uma_bin, folder, total, policies, dry=args.dry_run)


def ready_time(worker):
    return next((e["t"] for e in worker.events if e["event"] == "ready"), None)


def wait(seconds, *workers):
    end = time.time() + seconds
    while time.time() < end:
        for w in workers:
            w.poll(0.05)


def infer_rate(infer, since=None, until=None):
    """The inference process's tokens a second after its warm-up (its first steps fault its
    memory in), within [since, until]."""
    warm = ready_time(infer) + WARM_S if ready_time(infer) else None
    return infer.throughput(max(x for x in (since, warm) if x is not None), until)


def step_times(worker, since=None, until=None):
    return [round(e["ms"]) for e in worker.events if e["event"] == "step" and
            (since is None or e["t"] >= since) and (until is None or e["t"] <= until)]


def row_alone(args, folder, kind):
    n = node(args, folder, args.total, [policy("infer", 0, 10)])
    try:
        seconds = WARM_S + args.seconds if kind == "infer" else args.seconds
        w = Worker(args, n, kind, 0, args.total, 10 if kind == "infer" else 0, seconds)
        run_until_done(w)
        rate = infer_rate(w) if kind == "infer" else w.throughput()
        return {"row": f"{kind} alone", "throughput": rate, "steps_ms": step_times(w),
                "oom": w.oom(), "errors": w.errors(), "report": n.report()}
    finally:
        n.stop()


def beside(args, n, infer_claim, train_claim, train_extra=()):
    """The inference process first, warmed up; then the trainer beside it."""
    infer = Worker(args, n, "infer", *infer_claim, 4 * args.seconds + 2 * WARM_S)
    infer.wait_for("ready")
    wait(WARM_S, infer)
    train = Worker(args, n, "train", *train_claim, 2 * args.seconds, list(train_extra))
    train.wait_for("ready")
    return infer, train


def row_static(args, folder):
    half = args.total // 2
    n = node(args, folder, args.total, [policy("infer", half, 0), policy("train", half, 0)])
    try:
        infer, train = beside(args, n, (half, half, 0), (half, half, 0))
        start = time.time()
        wait(args.seconds, infer, train)
        end = time.time()
        infer.proc.terminate()
        run_until_done(infer, train)
        return {"row": "static halves", "infer": infer_rate(infer, start, end),
                "train": train.throughput(start, None), "train_steps_ms": step_times(train),
                "oom": infer.oom() or train.oom(), "errors": infer.errors() + train.errors(),
                "report": n.report()}
    finally:
        n.stop()


def row_arbiter(args, folder):
    """Inference with priority beside a trainer that wants less than it uses (so it spills), asks
    for 20 GB more after a while, and gets the inference process's bytes when it is killed."""
    n = node(args, folder, args.total, [policy("infer", args.infer_need, 10)])
    try:
        infer, train = beside(args, n, (args.infer_need, args.infer_need, 10),
                              (0, args.train_wanted, 0),
                              ["--ask-more-after", str(args.seconds / 2), "--ask-more-bytes",
                               str(args.ask_more)])
        start = time.time()
        wait(args.seconds, infer, train)
        before = n.report()
        killed = time.time()
        infer.proc.send_signal(signal.SIGKILL)
        budget_before = max((b for t, b in budget_times(train) if t <= killed), default=0)
        run_until_done(infer, train)
        regrant = next((t - killed for t, b in budget_times(train)
                        if t > killed and b > budget_before), None)
        asked = next((e["t"] for e in train.events if e["event"] == "asked"), None)
        return {"row": "arbiter: infer priority; train wants less than it uses, asks +20 GB; "
                       "infer SIGKILLed",
                "infer": infer_rate(infer, start, killed),
                "train_steps_ms": step_times(train), "asked_after_s":
                    None if asked is None else round(asked - start, 2),
                "regrant_s": regrant, "train_budgets": [b for t, b in budget_times(train)],
                "infer_budgets": [b for t, b in budget_times(infer)],
                "oom": train.oom() or infer.oom(), "errors": train.errors(),
                "report_before_kill": before, "report": n.report()}
    finally:
        n.stop()


def row_move(args, folder):
    """The trainer holds the whole (smaller) budget; the inference process joins with priority,
    so the trainer must evict before the bytes are granted."""
    n = node(args, folder, args.move_total, [policy("infer", args.move_infer_need, 10)])
    try:
        train = Worker(args, n, "train", 0, args.move_total, 0, 3 * args.seconds)
        train.wait_for("ready")
        wait(args.seconds / 2, train)
        infer = Worker(args, n, "infer", args.move_infer_need, args.move_infer_need, 10,
                       WARM_S + args.seconds)
        run_until_done(infer, train)
        report = n.report()
        return {"row": "move: the trainer holds the budget, infer joins with priority",
                "move": move_figures(report, train), "report": report,
                "infer": infer_rate(infer), "oom": train.oom() or infer.oom(),
                "errors": train.errors() + infer.errors()}
    finally:
        n.stop()


def move_figures(report, train):
    """The move of the trainer's bytes to the inference process, from the arbiter's ledger: the
    trainer's shrink decided, the inference process's grant of those bytes (only after the
    trainer acknowledged), and the bytes the trainer's hooks spilled to the host meanwhile."""
    ds = decisions(report)
    shrink = next((d for d in ds if d["tenant"].endswith("/train") and
                   d["to_bytes"] < d["from_bytes"]), None)
    if shrink is None:
        return {"error": "no shrink of the trainer in the ledger"}
    grants = [d for d in ds if d["tenant"].endswith("/infer") and d["at_ms"] >= shrink["at_ms"]
              and d["to_bytes"] > d["from_bytes"]]
    done = grants[-1] if grants else None
    steps = [e for e in train.events if e["event"] == "step" and "spilled" in e]
    spilled = (steps[-1]["spilled"] - steps[0]["spilled"]) if steps else None
    member = next((m for d in report.get("devices", []) for m in d["members"]
                   if m["tenant"].endswith("/train")), {})
    budget = shrink["from_bytes"] - shrink["to_bytes"]
    acked = next((d["why"] for d in ds if d["at_ms"] >= shrink["at_ms"] and "evicted to" in d["why"]),
                 None)
    out = {"budget_moved_bytes": budget, "acknowledged": acked, "trainer_spilled_bytes": spilled,
           "trainer_slowest_shrink_ms": member.get("slowest_shrink_ms"),
           "trainer_resident_after": member.get("resident_bytes"),
           "target_ms": round(budget / 45e9 * 1e3 + 50, 1)}
    if done is not None:
        out["move_ms"] = done["at_ms"] - shrink["at_ms"]
        out["met"] = out["move_ms"] <= out["target_ms"]
    return out


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", choices=("infer", "train"))
    p.add_argument("--target")
    p.add_argument("--min-bytes", type=int, default=0)
    p.add_argument("--wanted-bytes", type=int, default=0)
    p.add_argument("--priority", type=int, default=0)
    p.add_argument("--layers", type=int)
    p.add_argument("--width", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--ask-more-after", type=float, default=0)
    p.add_argument("--ask-more-bytes", type=int, default=0)
    p.add_argument("--uma-bin")
    p.add_argument("--dry-run", action="store_true",
                   help="host backend, no torch: the orchestration only (CI-free check)")
    p.add_argument("--total-gb", type=float, default=32)
    p.add_argument("--infer-need-gb", type=float, default=6)
    p.add_argument("--train-wanted-gb", type=float, default=12)
    p.add_argument("--move-total-gb", type=float, default=24)
    p.add_argument("--move-infer-need-gb", type=float, default=14)
    p.add_argument("--ask-more-gb", type=float, default=20)
    p.add_argument("--infer-shape", default="24x2048x16", help="LAYERSxWIDTHxBATCH")
    p.add_argument("--train-shape", default="24x2048x4", help="LAYERSxWIDTHxBATCH")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--warm", type=float, default=WARM_S,
                   help="seconds of the inference process not measured (its memory faults in)")
    p.add_argument("--rows", default="alone,static,arbiter,move")
    p.add_argument("--json")
    args = p.parse_args()
    args.total = int(args.total_gb * GB)
    args.infer_need = int(args.infer_need_gb * GB)
    args.train_wanted = int(args.train_wanted_gb * GB)
    args.move_total = int(args.move_total_gb * GB)
    args.move_infer_need = int(args.move_infer_need_gb * GB)
    args.ask_more = int(args.ask_more_gb * GB)
    return args


def summarize(rows):
    alone = {r["row"].split()[0]: r["throughput"] for r in rows if r["row"].endswith("alone")}
    for r in rows:
        line = {k: (v[:12] + ["..."] if isinstance(v, list) and len(v) > 12 else v)
                for k, v in r.items() if not k.startswith("report")}
        for kind in ("infer", "train"):
            if isinstance(r.get(kind), (int, float)) and alone.get(kind):
                line[f"{kind}_vs_alone"] = round(r[kind] / alone[kind], 3)
        print(json.dumps(line), flush=True)


def main():
    global WARM_S
    args = arguments()
    WARM_S = args.warm
    if args.worker:
        return worker_main(args)
    if not args.uma_bin:
        raise SystemExit("arbiter_bench: --uma-bin names the uma executable")
    rows = []
    with tempfile.TemporaryDirectory(prefix="uma-arbiter-bench-") as folder:
        wanted = args.rows.split(",")
        if "alone" in wanted:
            rows += [row_alone(args, folder, "infer"), row_alone(args, folder, "train")]
        if "static" in wanted:
            rows.append(row_static(args, folder))
        if "arbiter" in wanted:
            rows.append(row_arbiter(args, folder))
        if "move" in wanted:
            rows.append(row_move(args, folder))
        summarize(rows)
        with open(os.path.join(folder, "serve.log")) as log:
            serve_log = log.read()[-20000:]
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"rows": rows, "serve_log": serve_log}, out, indent=1)


if __name__ == "__main__":
    main()
