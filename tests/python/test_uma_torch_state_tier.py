"""offload(step_in_backward=True, state_tier=True) with uma's tiers (issue 39): the optimizer
state that does not fit the budget lives in the host tier and streams through a ring of device
staging slots on the copy streams around each chunk's step (uma_torch/state_tier.py). Against the stand-in torch
(fakes/torch) and the stand-in tiers and plans (fakes/uma_fake_tiers.py over uma_fake_plans.py:
bytes copied for real), and once against libuma_c.so's own tiers where it has them."""

import textwrap
import unittest

from support import OFFLOAD_MODEL, library_path, run_fresh

PRELUDE = """
    import ctypes, json, math, os, sys
    import uma_c, uma_torch, uma_fake_tiers
    import torch
    from uma_torch.backward_step import BackwardStep
    path = os.environ["UMA_LIBRARY"]

    # The Model's sizes: 10 parameters (4096-element weights, 64-element biases), 115456 bytes;
    # AdamW's state 230912 bytes; a page of rounding at each end of every parameter's and
    # moment's range: 245760 bytes.
    PARAMS, STATE, ROUNDING = 115456, 230912, 2 * 4096 * 3 * 10
    # chunk_bytes=16000 below: a slot holds one 4096-element weight's two moments (33280 bytes
    # with their alignment: 36864, whole pages); the tests' ring has three slots, 110592 bytes
    # (the default is two: NumbersTest runs with it too).
    BackwardStep.staging_slots = 3
    RING = 3 * 36864
    ALL_IN_THE_HOST_TIER = PARAMS + ROUNDING + RING

    def floats(tensor):
        return (ctypes.c_float * tensor.numel()).from_address(tensor.data_ptr())

    def adam(p, g, m, v, lr):
        for k in range(len(p)):
            m[k] = 0.9 * m[k] + 0.1 * g[k]
            v[k] = 0.999 * v[k] + 0.001 * g[k] * g[k]
            p[k] -= lr * m[k] / (math.sqrt(v[k]) + 1e-8)

    class Computing(torch.optim.AdamW):
        # AdamW that computes (float32 storage, the same arithmetic whatever holds the state):
        # each parameter in its own update (a multi-kernel step), or through torch._fused_adamw_
        def _update(self, param, state):
            if not state:
                super()._update(param, state)
                for t in state.values():
                    ctypes.memset(t.data_ptr(), 0, 4 * t.numel())
            torch.cuda.log.append(("state", state["exp_avg"].data_ptr(),
                                   torch.cuda.current_stream().cuda_stream))
            if not self.param_groups[0]["fused"]:
                adam(floats(param), floats(param.grad), floats(state["exp_avg"]),
                     floats(state["exp_avg_sq"]), self.param_groups[0]["lr"])

    def fused(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, **kw):
        for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
            adam(floats(p), floats(g), floats(m), floats(v), lr)

    def seeded(model, passes):
        # deterministic parameters, and gradients made by a hook that runs before offload's
        params = list(dict.fromkeys(model.parameters()))
        for i, p in enumerate(params):
            values = floats(p)
            for k in range(len(values)):
                values[k] = ((k * 7 + i) % 13 - 6) * 0.01
            def fill(param, i=i):
                values = floats(param.grad)
                for k in range(len(values)):
                    values[k] = math.sin(passes[0] * 13 + i * 7 + k) * 0.1
            p.register_post_accumulate_grad_hook(fill)
        return params

    def step(model, opt, passes):
        passes[0] += 1
        model(None)
        torch.autograd.run_backward()
        opt.step()
        opt.zero_grad()

    def tiered(budget=None, chunk_bytes=16000, fused_step=False, log=None):
        # the stand-in tiers and plans, uma installed (host backend), a Model with a computing
        # AdamW, seeded; offloaded when `budget` is given
        global fake
        fake = uma_fake_tiers.install(path, torch.cuda.log if log is None else log)
        uma_torch.install(backend="host", quota_bytes=64 << 20)
        return build(budget, chunk_bytes, fused_step)

    def build(budget=None, chunk_bytes=16000, fused_step=False):
        model, passes = Model(), [0]
        params = seeded(model, passes)
        opt = Computing(model.parameters(), lr=0.01, fused=fused_step)
        handle = None if budget is None else uma_torch.offload(
            model, opt, budget_bytes=budget, step_in_backward=True, state_tier=True,
            chunk_bytes=chunk_bytes)
        return model, opt, handle, passes, params

    def contents(tensor):
        return ctypes.string_at(tensor.data_ptr(), tensor.numel() * tensor.element_size()).hex()
"""


def fresh(code):
    library_path()
    return run_fresh(textwrap.dedent(PRELUDE) + OFFLOAD_MODEL + textwrap.dedent(code),
                     fakes=True)[0]


RING = 3 * 36864  # as in PRELUDE
ALL_IN_THE_HOST_TIER = 115456 + 245760 + RING


class PartitionTest(unittest.TestCase):
    """The budget less the parameters goes to the staging ring first, then to the state of the
    first layers; the rest of the state goes to the host tier."""

    def test_a_budget_sweep_places_the_state_and_the_ring_and_each_budget_holds(self):
        result = fresh("""
            fake, out = None, {}
            for budget in (ALL_IN_THE_HOST_TIER - 1, ALL_IN_THE_HOST_TIER,
                           ALL_IN_THE_HOST_TIER + 98816, PARAMS + ROUNDING + STATE - 1,
                           PARAMS + ROUNDING + STATE):
                if fake is None:
                    model, opt, _, passes, params = tiered()
                else:
                    model, opt, _, passes, params = build()
                try:
                    handle = uma_torch.offload(model, opt, budget_bytes=budget,
                                               step_in_backward=True, state_tier=True,
                                               chunk_bytes=16000)
                except uma_torch.OffloadError as error:
                    out[budget] = dict(refused=str(error), hooks=model.hook_count() - 10,
                                       budget_back=fake._inner.budgets[0] != budget)
                    continue
                fake._inner.peak = 0
                for _ in range(3):
                    step(model, opt, passes)
                bs = handle.backward_step
                names = {id(p): n for n, p in model.named_parameters()}
                out[budget] = dict(
                    tier=bs.tier is not None, stats=dict(bs.stats),
                    resident=sorted(names[i] for i in bs.reserved if i in names),
                    host=sorted(names[i] for i in (bs.tier.records if bs.tier else ())),
                    peak=fake._inner.peak)
                handle.undo()
            print(json.dumps(out))
            """)
        budgets = {int(k): v for k, v in result.items()}
        too_small = budgets[ALL_IN_THE_HOST_TIER - 1]
        self.assertIn(f"3 staging slots of 36864 bytes ({RING} bytes of device memory",
                      too_small["refused"])
        self.assertIn(f"a budget of {ALL_IN_THE_HOST_TIER} bytes holds them and a ring for "
                      "all of the state", too_small["refused"])
        self.assertEqual(too_small["hooks"], 0, "a refused offload leaves no hook of its own")
        self.assertTrue(too_small["budget_back"])

        exact = budgets[ALL_IN_THE_HOST_TIER]
        self.assertTrue(exact["tier"], "a budget that exactly fits the ring works")
        self.assertEqual(exact["resident"], [])
        self.assertEqual(len(exact["host"]), 10, "every parameter's state in the host tier")
        self.assertEqual(exact["stats"]["host_state_bytes"], 230912)
        self.assertEqual(exact["stats"]["staging_bytes"], RING)
        self.assertLessEqual(exact["peak"], ALL_IN_THE_HOST_TIER)

        mixed = budgets[ALL_IN_THE_HOST_TIER + 98816]
        first = ["blocks.0.fc.bias", "blocks.0.fc.weight", "blocks.0.proj.weight",
                 "embed.weight"]
        self.assertEqual(mixed["resident"], first, "the first layers' state stays resident")
        self.assertEqual(mixed["host"], [f"blocks.{b}.{n}" for b in (1, 2)
                                         for n in ("fc.bias", "fc.weight", "proj.weight")])
        self.assertEqual(mixed["stats"]["resident_state_bytes"], 98816)
        self.assertEqual(mixed["stats"]["host_state_bytes"], 132096)
        self.assertLessEqual(mixed["peak"], ALL_IN_THE_HOST_TIER + 98816)

        short = budgets[115456 + 245760 + 230912 - 1]
        self.assertTrue(short["tier"], "a byte short of the whole state: the ring comes first")
        self.assertEqual(short["stats"]["resident_state_bytes"] +
                         short["stats"]["host_state_bytes"], 230912)
        self.assertLessEqual(short["peak"], 115456 + 245760 + 230912 - 1)

        whole = budgets[115456 + 245760 + 230912]
        self.assertFalse(whole["tier"], "everything fits: no ring, no host tier")
        self.assertEqual(whole["stats"]["resident_state_bytes"], 230912)
        for budget, run in budgets.items():
            if "stats" in run:
                self.assertEqual(run["stats"]["mapped_state_bytes"], 0, budget)

    def test_state_larger_than_a_slot_takes_the_mapped_way_and_does_not_size_the_ring(self):
        """A slot holds a chunk's state (that of a parameter of chunk_bytes): a larger state
        (an embedding's) is mapped as without the tiers, rather than making every slot its
        size (and the ring too large for the budget it would then leave)."""
        result = fresh("""
            model, opt, _, passes, params = tiered()
            ring = 3 * 20480  # chunk_bytes=8000: a slot of 2 x 8192 + 512 bytes, in pages
            handle = uma_torch.offload(model, opt, budget_bytes=PARAMS + ROUNDING + ring,
                                       step_in_backward=True, state_tier=True,
                                       chunk_bytes=8000)
            for _ in range(3):
                step(model, opt, passes)
            bs = handle.backward_step
            out = dict(slot=bs.tier.slot_bytes, stats=dict(bs.stats), peak=fake._inner.peak,
                       budget=PARAMS + ROUNDING + ring)
            handle.undo()
            print(json.dumps(out))
            """)
        stats = result["stats"]
        self.assertEqual(result["slot"], 20480)
        self.assertEqual(stats["mapped_state_bytes"], 7 * 32768, "the weights' moments mapped")
        self.assertEqual(stats["host_state_bytes"], 3 * 512, "the biases' in the host tier")
        self.assertEqual(stats["streamed_chunks"], 2 * 3, "a bias's chunk a block, each step")
        self.assertLessEqual(result["peak"], result["budget"])


class RingTest(unittest.TestCase):
    """Per chunk: a fill into a free slot on the copy-in stream, sent ahead in the last pass's
    order; the step stream waits for it; the copy back on the copy-out stream after the step;
    a slot filled again only after its copy back."""

    def test_a_slot_is_filled_again_only_after_its_copy_back_and_steps_wait_for_their_fill(self):
        result = fresh("""
            model, opt, handle, passes, params = tiered(ALL_IN_THE_HOST_TIER)
            bs = handle.backward_step
            tier = bs.tier
            h2d, d2h = tier.h2d.cuda_stream, tier.d2h.cuda_stream
            steps = [s.cuda_stream for s in bs.streams]
            slots = [(s.ptr, s.ptr + tier.slot_bytes) for s in tier.slots]
            slot_of = lambda a: next((k for k, (lo, hi) in enumerate(slots) if lo <= a < hi),
                                     None)
            log = torch.cuda.log
            step(model, opt, passes)  # makes the state, moves it into the host tier
            for _ in range(3):
                step(model, opt, passes)
            # From the start (the first fills go ahead at the end of the first pass): the events
            # each copy's stream waited for, as the copies and steps came in the log.
            filled, free, waited, written = {}, {}, {}, {}  # written: host range -> event
            pending, after_step, last_slot = None, {}, None
            fills = reuses = reuses_after_back = steps_in_slot = steps_after_fill = 0
            backs = backs_after_step = reads = reads_after_write = 0
            for e in log:
                if e[0] == "wait_event":
                    waited.setdefault(e[1], set()).add(e[2])
                elif e[0] == "uma_copy" and e[4] == h2d:
                    k = slot_of(e[1])
                    fills += 1
                    if k in free:
                        reuses += 1
                        reuses_after_back += free[k] in waited.get(h2d, ())
                    writes = [event for (lo, hi), event in written.items()
                              if lo < e[2] + e[3] and e[2] < hi]
                    reads += bool(writes)
                    reads_after_write += bool(writes) and all(
                        event in waited.get(h2d, ()) for event in writes)
                    pending = ("fill", k, None)
                elif e[0] == "uma_copy" and e[4] == d2h:
                    k = slot_of(e[2])  # None: the first step's moves into the host tier
                    if k is not None:
                        backs += 1
                        backs_after_step += after_step.get(k) in waited.get(d2h, ())
                    ranges = pending[2] if pending and pending[0] == "back" else []
                    pending = ("back", k, ranges + [(e[1], e[1] + e[3])])
                elif e[0] == "record" and pending and e[1] == (h2d if pending[0] == "fill"
                                                              else d2h):
                    if pending[0] == "fill":
                        filled[pending[1]] = e[2]
                    else:
                        if pending[1] is not None:
                            free[pending[1]] = e[2]
                        for lo, hi in pending[2]:
                            for old in [r for r in written if r[0] < hi and lo < r[1]]:
                                del written[old]
                            written[(lo, hi)] = e[2]
                    pending = None
                elif e[0] == "state" and slot_of(e[1]) is not None:
                    k = slot_of(e[1])
                    steps_in_slot += 1
                    steps_after_fill += filled.get(k) in waited.get(e[2], ())
                    last_slot = k
                elif e[0] == "record" and e[1] in steps:
                    after_step[last_slot] = e[2]
            handle.undo()
            print(json.dumps(dict(fills=fills, reuses=reuses, reuses_after_back=reuses_after_back,
                                  steps_in_slot=steps_in_slot, steps_after_fill=steps_after_fill,
                                  backs=backs, backs_after_step=backs_after_step, reads=reads,
                                  reads_after_write=reads_after_write,
                                  stats=bs.stats, streams=len({h2d, d2h, *steps, 0}))))
            """)
        stats = result["stats"]
        self.assertEqual(result["streams"], 5, "copy-in, copy-out, two step streams, compute")
        # 16000-byte chunks: one weight each (a bias rides with the next weight), 7 a pass
        self.assertEqual(stats["streamed_chunks"], 3 * 7)
        self.assertEqual(stats["filled_on_demand_chunks"], 0, "every fill sent ahead")
        self.assertGreater(result["reuses"], 0)
        self.assertEqual(result["reuses_after_back"], result["reuses"],
                         "a slot is filled again only after its copy back")
        self.assertEqual(result["steps_in_slot"], 3 * 10, "every parameter stepped in a slot")
        self.assertEqual(result["steps_after_fill"], result["steps_in_slot"],
                         "each step waits for its slot's fill")
        self.assertEqual(result["backs"], 3 * 7, "one copy back a chunk")
        self.assertEqual(result["backs_after_step"], result["backs"],
                         "each copy back waits for its chunk's step")
        self.assertEqual(result["reads"], result["fills"], "every fill reads state written by "
                         "a copy to the host tier")
        self.assertEqual(result["reads_after_write"], result["reads"],
                         "a fill waits for the last copy that wrote the host tier it reads")
        # A chunk's state is one copy each way, the alignment between its tensors included: a
        # bias's moments (2 x 256 bytes) take 1024 bytes before the weight's that follow them.
        pass_bytes = 230912 + 3 * 512
        self.assertEqual(stats["copied_to_host_bytes"], 230912 + 3 * pass_bytes,
                         "the first step's state moved into the host tier, then copied back "
                         "after each of three steps")
        self.assertEqual(stats["copied_to_device_bytes"], 3 * pass_bytes + 2 * 32768,
                         "all of it into the slots for three steps, and the first two chunks "
                         "(the last block's weights' moments) sent ahead for the next")

    def test_a_changed_chunk_order_fills_on_demand_and_the_next_pass_follows_it(self):
        result = fresh("""
            model, opt, handle, passes, params = tiered(ALL_IN_THE_HOST_TIER)
            bs = handle.backward_step
            step(model, opt, passes)
            step(model, opt, passes)
            before = dict(bs.stats)
            bs.chunk_bytes = 40000  # two weights a chunk from here on: other units
            step(model, opt, passes)
            changed = dict(bs.stats)
            step(model, opt, passes)
            handle.undo()
            print(json.dumps(dict(before=before, changed=changed, after=dict(bs.stats))))
            """)
        before, changed, after = result["before"], result["changed"], result["after"]
        self.assertEqual(before["filled_on_demand_chunks"], 0)
        self.assertGreater(changed["filled_on_demand_chunks"], 0, "the prediction missed")
        self.assertEqual(after["filled_on_demand_chunks"], changed["filled_on_demand_chunks"],
                         "the pass after follows the new order")

    def test_a_first_step_chunk_larger_than_a_slot_is_never_filled_and_numbers_hold(self):
        """The first step's chunks close on chunk_bytes alone (no state yet); from the second
        on, a chunk also closes where its state would not fit a slot. The first pass's order
        is then no prediction for chunks larger than a slot: those are not sent ahead."""
        result = fresh("""
            Model.__init__.__defaults__ = (8, 64, "cuda")  # 8 blocks: a slot of 81920 bytes,
            fake = uma_fake_tiers.install(path, torch.cuda.log)  # first-step chunks of three
            uma_torch.install(backend="host", quota_bytes=64 << 20)  # weights (101376 bytes)
            native = build()
            offloaded = build(280576 + 2 * 4096 * 3 * 26 + 3 * 81920, chunk_bytes=40000)
            tier = offloaded[2].backward_step.tier
            slots = [(s.ptr, s.ptr + tier.slot_bytes) for s in tier.slots]
            inside = lambda a, n: any(lo <= a and a + n <= hi for lo, hi in slots)
            touches = lambda a: any(lo <= a < hi for lo, hi in slots)
            for _ in range(4):
                for model, opt, handle, passes, params in (native, offloaded):
                    step(model, opt, passes)
            copies = [e for e in torch.cuda.log if e[0] == "uma_copy"]
            staged = [e for e in copies if touches(e[1]) or touches(e[2])]
            print(json.dumps(dict(
                slot=tier.slot_bytes, staged=len(staged),
                within=all(inside(e[1], e[3]) or inside(e[2], e[3]) for e in staged),
                same=[contents(a) == contents(b) for a, b in zip(native[4], offloaded[4])],
                stats=dict(offloaded[2].backward_step.stats))))
            """)
        self.assertEqual(result["slot"], 81920)
        self.assertGreater(result["staged"], 0)
        self.assertTrue(result["within"], "every copy into or out of a slot stays inside it")
        self.assertEqual(result["same"], [True] * 25, "the parameters equal a native run's")
        self.assertGreater(result["stats"]["filled_on_demand_chunks"], 0,
                           "the second step's chunks were not those of the first")

    def test_exposed_transfer_is_how_long_step_streams_waited_for_their_fills(self):
        result = fresh("""
            model, opt, handle, passes, params = tiered(ALL_IN_THE_HOST_TIER)
            bs = handle.backward_step
            for s in bs.streams:
                s.clock_ms = 4.0
            bs.tier.h2d.clock_ms = 10.0  # each fill ends 6 ms after its step stream got there
            step(model, opt, passes)  # makes the state: nothing streamed
            first = bs.exposed_transfer_ms()
            step(model, opt, passes)
            late = bs.exposed_transfer_ms()
            bs.tier.h2d.clock_ms = 1.0  # fills done before their step stream got there
            step(model, opt, passes)
            print(json.dumps(dict(first=first, late=late, total=bs.exposed_transfer_ms())))
            """)
        self.assertEqual(result["first"], 0.0)
        self.assertEqual(result["late"], 7 * 6.0, "7 chunks, each waited 6 ms")
        self.assertEqual(result["total"], 7 * 6.0 + 2 * 6.0,
                         "the third pass waited only for the two fills sent ahead in the "
                         "second (at 10 ms)")


class NumbersTest(unittest.TestCase):
    """The same update as without offload: the same step on the same numbers, whichever memory
    holds them."""

    CODE = """
        BackwardStep.staging_slots = {slots}
        fake = uma_fake_tiers.install(path, torch.cuda.log)
        uma_torch.install(backend="host", quota_bytes=64 << 20)
        native = build(fused_step={fused})
        offloaded = build(ALL_IN_THE_HOST_TIER + 98816, fused_step={fused})
        runs = [native, offloaded]
        for _ in range(3):
            for model, opt, handle, passes, params in runs:
                step(model, opt, passes)
        saved = [{{i: {{k: contents(t) for k, t in s.items()}}
                  for i, s in opt.state_dict()["state"].items()}} for _, opt, *_ in runs]
        devices = sorted({{str(t.is_cuda) for s in runs[1][1].state_dict()["state"].values()
                          for t in s.values()}})
        for model, opt, handle, passes, params in runs:
            step(model, opt, passes)
        # load_state_dict() of what was saved (tensors on the host, as a checkpoint holds them)
        for (model, opt, handle, passes, params), state in zip(runs, saved):
            loaded = {{}}
            for i, entries in state.items():
                loaded[int(i)] = {{}}
                for k, text in entries.items():
                    t = torch.empty(len(text) // 8, device="cpu")
                    ctypes.memmove(t.data_ptr(), bytes.fromhex(text), len(text) // 2)
                    loaded[int(i)][k] = t
            opt.load_state_dict(dict(state=loaded, param_groups=opt.state_dict()["param_groups"]))
        reloaded = runs[1][2].backward_step.stats["reloaded_state_bytes"]
        # a state tensor replaced by hand (no hook sees it): taken at its chunk's next step
        for model, opt, handle, passes, params in runs:
            t = torch.empty(4096, device="cuda")
            floats(t)[:] = [0.5] * 4096
            opt.state[params[-1]]["exp_avg"] = t
        runs[1][2].backward_step.chunk_bytes = 40000  # other chunks: fills not sent ahead
        for _ in range(2):
            for model, opt, handle, passes, params in runs:
                step(model, opt, passes)
        out = []
        for model, opt, handle, passes, params in runs:
            state = opt.state_dict()["state"]
            out.append([contents(p) for p in params] +
                       [contents(t) for i in sorted(state) for t in state[i].values()])
        stats = dict(runs[1][2].backward_step.stats)
        runs[1][2].undo()
        undone = [contents(t) for p in runs[1][4] for t in runs[1][1].state[p].values()]
        on_device = all(t.is_cuda for s in runs[1][1].state.values() for t in s.values())
        print(json.dumps(dict(native=out[0], offloaded=out[1], saved=saved, devices=devices,
                              reloaded=reloaded, stats=stats, undone=undone,
                              native_state=out[0][10:], on_device=on_device,
                              host_tier_after=fake.counters["host_tier_bytes"],
                              device_tier_after=fake.counters["device_tier_bytes"])))
    """

    def check(self, result, host_state):
        self.assertEqual(result["stats"]["host_state_bytes"], host_state)
        self.assertGreater(result["stats"]["streamed_chunks"], 0)
        self.assertGreater(result["stats"]["filled_on_demand_chunks"], 0)
        self.assertEqual(result["saved"][0], result["saved"][1],
                         "state_dict(): the host tier holds what the device held natively")
        self.assertEqual(result["devices"], ["False", "True"],
                         "state_dict(): host tier state as CPU tensors, resident on the device")
        self.assertEqual(result["reloaded"], 230912,
                         "load_state_dict(): the state copied back where it was placed (the "
                         "host tier, the resident tensors) at once")
        self.assertEqual(result["native"], result["offloaded"],
                         "parameters and state equal a native run's, bit for bit")
        self.assertEqual(result["undone"], result["native_state"],
                         "undo() puts the state back on the device, unchanged")
        self.assertTrue(result["on_device"])
        self.assertEqual(result["host_tier_after"], 0, "the host tier went back to uma")
        self.assertEqual(result["device_tier_after"], 0, "so did the staging ring")

    def test_a_multi_kernel_step_equals_a_native_run_across_a_state_dict_round_trip(self):
        # the default ring of two slots leaves room for b1's fc.weight and the biases too: the
        # host tier holds b1's proj.weight and b2's weights
        self.check(fresh(self.CODE.format(fused=False, slots=2)), 3 * 32768)

    def test_a_fused_step_equals_a_native_run_across_a_state_dict_round_trip(self):
        self.check(fresh("torch._fused_adamw_ = fused\n" + textwrap.dedent(
            self.CODE.format(fused=True, slots=3))), 132096)  # b1's and b2's state

    def test_state_an_optimizer_replaces_instead_of_updating_in_place_is_copied_back(self):
        result = fresh("""
            class OutOfPlace(Computing):
                def _update(self, param, state):
                    super()._update(param, state)
                    for key in ("exp_avg", "exp_avg_sq"):  # the result in a tensor of its own
                        t = torch.empty(state[key].numel(), device="cuda")
                        ctypes.memmove(t.data_ptr(), state[key].data_ptr(), 4 * t.numel())
                        state[key] = t
            fake = uma_fake_tiers.install(path, torch.cuda.log)
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            native = build()
            Computing = OutOfPlace
            offloaded = build(ALL_IN_THE_HOST_TIER)
            for _ in range(3):
                for model, opt, handle, passes, params in (native, offloaded):
                    step(model, opt, passes)
            out = []
            for model, opt, handle, passes, params in (native, offloaded):
                state = opt.state_dict()["state"]
                out.append([contents(p) for p in params] +
                           [contents(t) for i in sorted(state) for t in state[i].values()])
            print(json.dumps(dict(same=out[0] == out[1],
                                  host=all(not t.is_cuda for s in offloaded[1].state.values()
                                           for t in s.values()))))
            """)
        self.assertTrue(result["same"], "the replacements' values reached the host tier")
        self.assertTrue(result["host"], "the host tier's tensors are the state again")


class RefusalTest(unittest.TestCase):
    def test_what_the_tier_cannot_honour_is_refused_by_name_and_the_old_refusals_stay(self):
        result = fresh("""
            out = {}
            def attempt(name, fn):
                try:
                    fn()
                    out[name] = "ran"
                except Exception as error:
                    out[name] = type(error).__name__ + ": " + str(error)
            model, opt, handle, passes, params = tiered(ALL_IN_THE_HOST_TIER)
            step(model, opt, passes)
            passes[0] += 1
            model(None)
            torch.autograd.run_backward()
            model(None)
            attempt("accumulate", torch.autograd.run_backward)
            opt.zero_grad()
            opt.step()
            step(model, opt, passes)
            attempt("kwargs", lambda: opt.step(grad_scaler=None))
            passes[0] += 1
            model(None)
            torch.autograd.run_backward()
            params[1].grad = torch.empty(4096, device="cuda")  # clipped: stepped already
            attempt("grad_set", opt.step)
            opt.zero_grad()
            step(model, opt, passes)
            # a gradient no hook saw, on a parameter whose state is in the host tier
            params[1].grad = torch.empty(4096, device="cuda")
            attempt("unseen", opt.step)
            opt.zero_grad()
            opt.state[params[1]]["exp_avg"] = torch.empty(5, device="cuda")
            attempt("bad_state", lambda: step(model, opt, passes))
            handle.undo()
            for slots in (1, 0, True, "3"):
                BackwardStep.staging_slots = slots
                other = build()
                attempt(f"slots {slots!r}", lambda: uma_torch.offload(
                    other[0], other[1], budget_bytes=ALL_IN_THE_HOST_TIER,
                    step_in_backward=True, state_tier=True, chunk_bytes=16000))
            BackwardStep.staging_slots = 3
            other = build()
            attempt("state_tier alone", lambda: uma_torch.offload(
                other[0], other[1], budget_bytes=ALL_IN_THE_HOST_TIER, state_tier=True))
            print(json.dumps(dict(out=out, left=fake.counters["device_tier_bytes"])))
            """)
        out = result["out"]
        self.assertIn("ValueError", out["state_tier alone"])
        self.assertIn("step_in_backward=True; pass both", out["state_tier alone"])
        self.assertIn("gradient accumulation", out["accumulate"])
        self.assertIn("grad_scaler", out["kwargs"])
        self.assertIn("have a gradient again at optimizer.step()", out["grad_set"])
        self.assertIn("StepInBackwardError", out["unseen"])
        self.assertIn("state is in the host tier", out["unseen"])
        self.assertIn("StepInBackwardError", out["bad_state"])
        self.assertIn("'exp_avg'", out["bad_state"])
        for slots in ("1", "0", "True", "'3'"):
            self.assertIn("staging_slots must be an int of at least 2", out[f"slots {slots}"])
        self.assertEqual(result["left"], 0, "no staging ring left behind")

    def test_by_default_the_state_is_mapped_as_before(self):
        result = fresh("""
            model, opt, handle, passes, params = tiered()
            handle = uma_torch.offload(model, opt, budget_bytes=ALL_IN_THE_HOST_TIER,
                                       step_in_backward=True, chunk_bytes=16000)
            step(model, opt, passes)
            out = dict(tier=handle.backward_step.tier is not None,
                       stats=dict(handle.backward_step.stats), copies=fake.counters["copies"])
            handle.undo()
            print(json.dumps(out))
            """)
        self.assertFalse(result["tier"])
        self.assertGreater(result["stats"]["mapped_state_bytes"], 0)
        self.assertEqual(result["copies"], 0)


class WithTheLibrarysTiersTest(unittest.TestCase):
    """libuma_c.so's own tiers and plans (host backend: system memory, copies done at once),
    where it has them; skipped before."""

    def test_the_state_streams_through_the_librarys_tiers_and_equals_a_native_run(self):
        result = fresh("""
            lib = uma_c.library(path)[1]
            if not (uma_c.binding.has_tiers(lib) and uma_c.binding.has_plans(lib)):
                print(json.dumps(dict(skip=True))); sys.exit(0)
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            native = build()
            offloaded = build(ALL_IN_THE_HOST_TIER + 98816)
            for _ in range(3):
                for model, opt, handle, passes, params in (native, offloaded):
                    step(model, opt, passes)
            handle = offloaded[2]
            report = uma_torch.residency()
            same = [contents(a) == contents(b) for a, b in zip(native[4], offloaded[4])]
            stats = dict(handle.backward_step.stats)
            handle.undo()
            print(json.dumps(dict(same=same, stats=stats, device=report["devices"][0],
                                  copied=[report.get("copy_to_device_bytes"),
                                          report.get("copy_to_host_bytes")],
                                  tiers=uma_torch.stats().get("device_tier_bytes"))))
            """)
        if result.get("skip"):
            self.skipTest("this libuma_c.so has no tiers or no plan calls yet (issue 39)")
        self.assertEqual(result["same"], [True] * 10, "the parameters equal a native run's")
        self.assertLessEqual(result["device"]["peak_bytes"], ALL_IN_THE_HOST_TIER + 98816)
        self.assertEqual(result["copied"], [result["stats"]["copied_to_device_bytes"],
                                            result["stats"]["copied_to_host_bytes"]],
                         "the library counted the copies the tier made")
        self.assertEqual(result["tiers"], 0, "the staging ring given back")


if __name__ == "__main__":
    unittest.main()
