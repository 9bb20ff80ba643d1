"""uma_torch.offload() against the stand-in torch (fakes/torch: modules with hooks, an AdamW, a
backward replayed from the forward's calls, streams and events that log) and the stand-in plan
calls (fakes/uma_fake_plans.py over the real libuma_c.so): which plans the hooks issue, in which
order, on which stream; undo; the refusals."""

import textwrap
import unittest

from support import OFFLOAD_MODEL, library_path, run_fresh

PRELUDE = """
    import json, os, sys
    import uma_c, uma_torch, uma_fake_plans
    import torch
    path = os.environ["UMA_LIBRARY"]

    def names(model, opt):
        # address -> name of every parameter, gradient and optimizer state now alive
        out = {}
        for name, p in model.named_parameters():
            out[p.data_ptr()] = name
            if p.grad is not None:
                out[p.grad.data_ptr()] = "grad:" + name
            for key, value in opt.state.get(p, {}).items():
                out[value.data_ptr()] = f"{key}:{name}"
        return out

    def trace(log, table, start=0):
        # the plan calls and optimizer steps of log[start:], by name
        out = []
        for entry in log[start:]:
            if entry[0] in ("will_access", "done_with", "dead"):
                mode = [entry[2]["mode"], entry[2]["policy"]] if entry[0] == "will_access" else []
                out.append([entry[0]] + mode + [sorted(table.get(p, hex(p)) for p, _ in entry[1])])
            elif entry[0] == "optimizer.step":
                out.append(["step", sorted(table.get(p, hex(p)) for p in entry[1])])
        return out

    def planned(optimizer=True):
        # the plan calls logged, uma installed (host backend), a Model and (optionally) its AdamW
        fake = uma_fake_plans.install(path, torch.cuda.log)
        uma_torch.install(backend="host", quota_bytes=64 << 20)
        model = Model()
        return fake, model, torch.optim.AdamW(model.parameters()) if optimizer else None

    def step(model, opt):
        model(None)
        torch.autograd.run_backward()
        opt.step()
"""

BLOCK = {"embed": ["embed.weight"],
         "b0": ["blocks.0.fc.bias", "blocks.0.fc.weight", "blocks.0.proj.weight"],
         "b1": ["blocks.1.fc.bias", "blocks.1.fc.weight", "blocks.1.proj.weight"],
         "b2": ["blocks.2.fc.bias", "blocks.2.fc.weight", "blocks.2.proj.weight"]}


def fresh(code):
    library_path()
    return run_fresh(textwrap.dedent(PRELUDE) + OFFLOAD_MODEL + textwrap.dedent(code),
                     fakes=True)[0]


def reads(block, policy="migrate"):
    return ["will_access", "read", policy, BLOCK[block]]


def done(block):
    return ["done_with", BLOCK[block]]


class OffloadPlansTest(unittest.TestCase):
    def test_forward_plans_each_block_and_sends_the_next_one_ahead_on_the_side_stream(self):
        result = fresh("""
            fake, model, opt = planned()
            handle = uma_torch.offload(model, opt, budget_bytes=1 << 20, policy="migrate")
            start = len(torch.cuda.log)
            model(None)
            log = torch.cuda.log[start:]
            plans = [e for e in log if e[0] == "will_access"]
            # Stream order: before each plan the side stream waits for an event just recorded
            # on the compute stream (0); after it, an event on the side stream that the compute
            # stream waits for before the block runs.
            ordered = []
            for i, e in enumerate(log):
                if e[0] == "will_access":
                    side = e[2]["stream"]
                    before, after = log[i - 2:i], log[i + 1]
                    waited = [w for w in log[i:] if w[0] == "wait_event" and w[1] == 0
                              and w[2] == after[2]]
                    ordered.append(before[0][:2] == ("record", 0) and before[1][:2] ==
                                   ("wait_event", side) and before[0][2] == before[1][2]
                                   and after[:2] == ("record", side) and len(waited) == 1)
            print(json.dumps(dict(trace=trace(torch.cuda.log, names(model, opt), start),
                                  ordered=ordered, side=plans[0][2]["stream"],
                                  cycle=[plans[0][2]["cycle_bytes"], plans[0][2]["cycle_plans"]],
                                  holds=sum(fake.holds.values()), stats=handle.stats)))
            """)
        self.assertEqual(result["trace"], [
            reads("embed"), reads("b0"), done("embed"),  # b0 sent ahead while embed runs
            reads("b1"), done("b0"), reads("b2"), done("b1"),
            reads("embed"), done("b2"), done("embed")])  # the head: the tied embed weight
        self.assertEqual(result["ordered"], [True] * 5)
        self.assertNotEqual(result["side"], 0, "the moves go on a side stream, not the compute one")
        self.assertEqual(result["cycle"], [0, 0], "no cycle hint: the policies are uma's own")
        self.assertEqual(result["holds"], 0, "every plan ended after its block")
        self.assertEqual(result["stats"]["ahead"], 4)

    def test_backward_runs_in_reverse_with_gradients_planned_and_the_step_in_chunks(self):
        result = fresh("""
            fake, model, opt = planned()
            # a chunk holds about one block's parameters and gradients
            handle = uma_torch.offload(model, opt, budget_bytes=1 << 20, chunk_bytes=70000,
                                       policy="dynamic")  # uma's auto for parameters, grads
            model(None)
            start = len(torch.cuda.log)
            torch.autograd.run_backward()
            backward_end = len(torch.cuda.log)
            opt.step()
            first = trace(torch.cuda.log, names(model, opt), start)
            opt.zero_grad()
            second_start = len(torch.cuda.log)
            step(model, opt)
            table = names(model, opt)
            second = trace(torch.cuda.log, table, second_start)
            syncs = [e for e in torch.cuda.log[backward_end:second_start]
                     if e[0] == "event.synchronize"]
            cycle = [e[2] for e in torch.cuda.log if e[0] == "will_access"][0]
            print(json.dumps(dict(first=first, second=second, syncs=len(syncs),
                                  cycle=[cycle["cycle_bytes"], cycle["cycle_plans"]],
                                  holds=sum(fake.holds.values()), stats=handle.stats)))
            """)
        params = (64 * 64 + 3 * (64 * 64 + 64) + 3 * 64 * 64) * 4  # embed, 3 fc, 3 proj
        self.assertEqual(result["cycle"], [2 * params, 10], "parameters and gradients, 2 x 5 plans")
        first = result["first"]
        backward = [e for e in first if e[0] != "step"][:8]
        self.assertEqual(backward[0], reads("embed", "auto"), "the head's backward first")
        self.assertEqual(backward[1], reads("b2", "auto"), "b2's plan sent ahead, reverse order")
        self.assertEqual(backward[2], done("embed"))
        self.assertEqual(backward[3], reads("b1", "auto"), "b1's plan sent ahead at b2's turn")
        self.assertEqual(backward[5], ["will_access", "write", "auto",
                                       ["grad:" + n for n in BLOCK["b2"]]],
                         "b2's gradients planned at the next block; the tied embedding's "
                         "gradient only once its last use (the embedding) accumulated it")
        self.assertNotIn(["will_access", "write", "auto", ["grad:embed.weight"]], backward[:8])
        steps = [e[1] for e in first if e[0] == "step"]
        stepped = sorted(name for chunk in steps for name in chunk)
        everything = sorted(n for block in BLOCK.values() for n in block)
        self.assertEqual(stepped, everything, "every parameter stepped once, in chunks")
        self.assertEqual(len(steps), 4)
        for chunk in steps:  # each chunk planned before it steps: parameters written, grads read
            index = first.index(["step", chunk])
            planned = [e for e in first[:index] if e[0] == "will_access"]
            self.assertIn(["will_access", "write", "auto", chunk], planned)
            self.assertIn(["will_access", "read", "auto", ["grad:" + n for n in chunk]], planned)
        dead = sorted(n for e in first if e[0] == "dead" for n in e[1])
        self.assertEqual(dead, sorted("grad:" + n for n in everything),
                         "every gradient is dead after the step")
        self.assertEqual(result["syncs"], 4, "each chunk's step finished before its dead")
        # The second step also plans the optimizer state (made by the first), remote-mapped.
        state = [e for e in result["second"] if e[0] == "will_access" and e[2] == "remote_map"]
        self.assertEqual(sorted(n for e in state for n in e[3]),
                         sorted(f"{k}:{n}" for n in everything for k in ("exp_avg", "exp_avg_sq")))
        self.assertTrue(all(e[1] == "write" for e in state))
        self.assertEqual(result["holds"], 0)

    def test_undo_removes_every_hook_and_plan_and_restores_the_budget(self):
        result = fresh("""
            fake, model, opt = planned()
            plain_step = opt.step
            with uma_torch.offload(model, opt, budget_bytes=1 << 20, lookahead=2,
                                   policy="migrate") as handle:
                hooks = model.hook_count()
                replaced = "step" in vars(opt)
                model.embed(None)  # embed planned and ended; b0 and b1 sent ahead: held
                held = sum(fake.holds.values())
            after = len(torch.cuda.log)
            step(model, opt)
            plans_after = [e[0] for e in torch.cuda.log[after:]
                           if e[0] in ("will_access", "done_with", "dead")]
            again = uma_torch.offload(model, opt, budget_bytes=1 << 20)
            again.undo(); again.undo()
            budgets = [e for e in torch.cuda.log if e[0] == "set_device_budget"]
            print(json.dumps(dict(
                hooks=hooks, after_hooks=model.hook_count(), replaced=replaced,
                restored="step" not in vars(opt) and opt.step == plain_step, held=held,
                holds=sum(fake.holds.values()), budgets=[b[2] for b in budgets],
                plans_after=plans_after,
                memory=fake.memory)))
            """)
        self.assertEqual(result["hooks"], 5 * 4 + 10, "4 per block, 1 per parameter")
        self.assertTrue(result["replaced"])
        self.assertEqual(result["held"], 6, "two blocks sent ahead (3 ranges each)")
        self.assertEqual(result["after_hooks"], 0)
        self.assertTrue(result["restored"])
        self.assertEqual(result["holds"], 0, "undo ended the plans it held")
        self.assertEqual(result["plans_after"], [], "no plan once undone")
        self.assertEqual(result["budgets"], [1 << 20, result["memory"], 1 << 20, result["memory"]],
                         "the budget set, then back to none (the device's memory)")

    def test_a_block_the_budget_cannot_hold_is_refused_clearly_and_ahead_plans_give_way(self):
        result = fresh("""
            fake, model, _ = planned(optimizer=False)
            one_block = 64 * 64 * 4 * 2 + 256
            handle = uma_torch.offload(model, None, budget_bytes=one_block + 4096,
                                       policy="migrate")
            model.embed(None)
            model.blocks[0](None)  # b1 cannot be sent ahead while b0 is held
            refused_ahead = handle.stats["refused_ahead"]
            handle.undo()
            small = uma_torch.offload(model, None, budget_bytes=20000, policy="migrate")
            try:
                model(None)
                outcome = "ran"
            except MemoryError as error:
                outcome = [type(error).__name__, error.status_name, "budget" in str(error)]
            print(json.dumps(dict(refused_ahead=refused_ahead, outcome=outcome)))
            """)
        self.assertGreaterEqual(result["refused_ahead"], 1)
        self.assertEqual(result["outcome"], ["UmaMemoryError", "UMA_ERR_QUOTA_EXCEEDED", True])

    def test_gradient_accumulation_plans_the_second_pass_forward_and_its_gradients_written(self):
        result = fresh("""
            fake, model, opt = planned()
            handle = uma_torch.offload(model, opt, budget_bytes=1 << 20, policy="migrate")
            model(None)
            torch.autograd.run_backward()
            held_after_backward = sum(fake.holds.values())
            start = len(torch.cuda.log)
            model(None)  # a second micro-batch before the step
            forward_end = len(torch.cuda.log)
            torch.autograd.run_backward()
            table = names(model, opt)
            print(json.dumps(dict(held=held_after_backward,
                                  forward=trace(torch.cuda.log, table, start)[:3],
                                  backward=trace(torch.cuda.log, table, forward_end))))
            """)
        self.assertEqual(result["held"], 0, "the end of the backward pass ended its plans")
        self.assertEqual(result["forward"], [reads("embed"), reads("b0"), done("embed")])
        b2 = ["will_access", "write", "migrate", ["grad:" + n for n in BLOCK["b2"]]]
        self.assertIn(b2, result["backward"], "existing gradients are written by accumulation")

    def test_a_step_wrapper_made_after_offload_still_steps_in_chunks_and_survives_undo(self):
        result = fresh("""
            fake, model, opt = planned()
            handle = uma_torch.offload(model, opt, budget_bytes=1 << 20, chunk_bytes=70000,
                                       policy="migrate")
            func = opt.step.__func__  # what torch.optim.lr_scheduler does to optimizer.step
            calls = []
            def wrapper(*args, **kwargs):
                calls.append(1)
                return func.__get__(opt, type(opt))(*args, **kwargs)
            opt.step = wrapper
            def steps():
                start = len(torch.cuda.log)
                step(model, opt)
                opt.zero_grad()
                return len([e for e in torch.cuda.log[start:] if e[0] == "optimizer.step"])
            chunked = steps()
            handle.undo()
            plain = steps()
            print(json.dumps(dict(chunked=chunked, plain=plain, calls=len(calls),
                                  kept=opt.step is wrapper, holds=sum(fake.holds.values()))))
            """)
        self.assertEqual(result["chunked"], 4, "through the wrapper, still in chunks")
        self.assertEqual(result["plain"], 1, "after undo the wrapper reaches the plain step")
        self.assertEqual(result["calls"], 2)
        self.assertTrue(result["kept"], "undo left the wrapper made after it in place")
        self.assertEqual(result["holds"], 0)

    def test_auto_plans_once_what_fits_beside_the_gradients_resident_and_maps_the_rest(self):
        result = fresh("""
            fake, model, opt = planned()
            grads = sum(p.numel() * 4 for p in model.parameters())
            margin = 2 * 4096 * 2 * 10  # a page each end of each of the 10 parameters and grads
            start = len(torch.cuda.log)
            handle = uma_torch.offload(model, opt, budget_bytes=grads + margin + 40000)
            marks = [len(torch.cuda.log)]
            model(None)
            marks.append(len(torch.cuda.log))
            torch.autograd.run_backward()
            marks.append(len(torch.cuda.log))
            opt.step()
            table = names(model, opt)
            marks.append(len(torch.cuda.log))
            opt.zero_grad()
            step(model, opt)
            table.update(names(model, opt))
            marks.append(len(torch.cuda.log))
            parts = [trace(torch.cuda.log[:b], table, a) for a, b in zip([start] + marks, marks)]
            holds, hooks = sum(fake.holds.values()), model.hook_count()
            handle.undo()
            tight = uma_torch.offload(Model(), None, budget_bytes=grads // 2)
            print(json.dumps(dict(
                parts=parts, hooks=hooks, holds=holds, after=sum(fake.holds.values()),
                resident=handle.stats["resident_parameter_bytes"], peak=fake.peak,
                budget=grads + margin + 40000,
                tight=[tight.static, tight.grads_dead, len(tight.resident)])))
            """)
        setup, forward, backward, first, second = result["parts"]
        everything = sorted(n for block in BLOCK.values() for n in block)
        # In the blocks' order: embed (16384 bytes), b0's fc weight and bias fit in 40000; b0's
        # proj does not, nor anything after but the small biases.
        resident = ["blocks.0.fc.bias", "blocks.0.fc.weight", "blocks.1.fc.bias",
                    "blocks.2.fc.bias", "embed.weight"]
        self.assertEqual(result["resident"], 16384 + 16384 + 3 * 256)
        self.assertEqual(setup, [
            ["will_access", "write", "migrate", resident],
            ["will_access", "write", "remote_map", sorted(set(everything) - set(resident))]])
        self.assertEqual(forward, [], "nothing to plan per block: everything is in place")
        grads = ["will_access", "write", "migrate", ["grad:" + n for n in everything]]
        self.assertEqual(backward, [grads], "the gradients, once, when the backward pass ends")
        state = sorted(f"{k}:{n}" for n in everything for k in ("exp_avg", "exp_avg_sq"))
        self.assertEqual(first, [["step", everything],
                                 ["will_access", "write", "remote_map", state],
                                 ["done_with", grads[3]]], "the step whole; its state mapped")
        self.assertEqual(second, [grads, ["step", everything], ["done_with", grads[3]]])
        self.assertEqual(result["hooks"], 10, "only the gradients' hooks")
        self.assertEqual(result["holds"], 10 + 20, "parameters and state held until undo")
        self.assertEqual(result["after"], 0)
        self.assertLessEqual(result["peak"], result["budget"])
        self.assertEqual(result["tight"], [False, True, 0],
                         "gradients beyond the budget: block hooks, every parameter mapped, "
                         "gradients dead after the step")

    def test_when_the_budget_holds_everything_the_optimizer_state_stays_on_the_device(self):
        result = fresh("""
            fake, model, opt = planned()
            params = sum(p.numel() * 4 for p in model.parameters())
            budget = 4 * params + 2 * 4096 * 2 * 30  # parameters, gradients, two moments
            handle = uma_torch.offload(model, opt, budget_bytes=budget)
            step(model, opt)
            table = names(model, opt)
            start = len(torch.cuda.log)
            opt.zero_grad()
            step(model, opt)
            table.update(names(model, opt))
            second = trace(torch.cuda.log[start:], table, start)
            first = trace(torch.cuda.log[:start], table, 0)
            fits, peak = handle.state_resident, fake.peak
            handle.undo()
            print(json.dumps(dict(first=first, second=second, fits=fits, peak=peak,
                                  budget=budget, after=sum(fake.holds.values()))))
            """)
        everything = sorted(n for block in BLOCK.values() for n in block)
        state = sorted(f"{k}:{n}" for n in everything for k in ("exp_avg", "exp_avg_sq"))
        self.assertTrue(result["fits"])
        self.assertIn(["will_access", "write", "migrate", state], result["first"],
                      "the state is planned resident, not mapped")
        self.assertNotIn("remote_map", [e[2] for e in result["first"] if len(e) > 2])
        self.assertNotIn("will_access", [e[0] for e in result["second"] if e[2:3] != ["migrate"]])
        self.assertLessEqual(result["peak"], result["budget"])
        self.assertEqual(result["after"], 0)

    def test_a_dead_gradient_refused_for_a_page_still_held_does_not_fail_the_step(self):
        result = fresh("""
            fake, model, opt = planned()
            handle = uma_torch.offload(model, opt, budget_bytes=1 << 20, policy="migrate")
            model(None)
            torch.autograd.run_backward()
            grad = model.blocks[1].fc.bias.grad
            other = uma_c.Allocator.default(path)  # someone else's plan holds one gradient
            other.will_access([(grad.data_ptr(), grad.numel() * 4)])
            opt.step()
            print(json.dumps(dict(stats=handle.stats,
                                  grads=sum(p.numel() * 4 for p in model.parameters()))))
            """)
        self.assertEqual(result["stats"]["dead_refused"], 1)
        self.assertEqual(result["stats"]["dead_bytes"], result["grads"] - 256,
                         "every other gradient is dead")

    def test_the_partition_keeps_the_small_parameters_resident_first(self):
        result = fresh("""
            fake = uma_fake_plans.install(path, torch.cuda.log)
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            model = Model(n=160)  # weights of 100 KiB, biases of 640 bytes
            total = sum(p.numel() * 4 for p in model.parameters())
            margin = 2 * 4096 * 2 * 10
            handle = uma_torch.offload(model, None, budget_bytes=total + margin + 120000)
            print(json.dumps(sorted(n for n, p in model.named_parameters()
                                    if id(p) in handle.resident)))
            """)
        self.assertEqual(result, ["blocks.0.fc.bias", "blocks.1.fc.bias", "blocks.2.fc.bias",
                                  "embed.weight"], "the biases first, then the blocks' order")

    def test_static_plans_without_an_optimizer_end_each_backward_passs_gradient_plans(self):
        result = fresh("""
            fake, model, _ = planned(optimizer=False)
            handle = uma_torch.offload(model, None, budget_bytes=1 << 20)
            held = []
            for _ in range(2):
                model(None)
                torch.autograd.run_backward()
                held.append(sum(fake.holds.values()))
            print(json.dumps(dict(static=handle.static, held=held)))
            """)
        self.assertTrue(result["static"])
        self.assertEqual(result["held"], [10, 10], "only the parameters' static plans stay held")


class StepInBackwardTest(unittest.TestCase):
    """offload(step_in_backward=True): the optimizer steps chunk by chunk during the backward
    pass on a stream of its own; the state of the first layers stays resident, the rest is
    mapped and staged through device copies for each step."""

    RUN = """
        fake, model, opt = planned()
        params = sum(p.numel() * 4 for p in model.parameters())
        rounding = 2 * 4096 * 3 * 10  # a page each end of 10 parameters and their 2 moments
        room = 3 * 2 * 16384 + 2 * 256  # the state of embed and of b0
        handle = uma_torch.offload(model, opt, budget_bytes=params + rounding + room,
                                   step_in_backward=True, chunk_bytes=33000)
        sides = [stream.cuda_stream for stream in handle.backward_step.streams]
    """

    def test_chunks_step_during_backward_on_their_stream_and_only_the_first_layers_state_stays(
            self):
        result = fresh(textwrap.dedent(self.RUN) + textwrap.dedent("""
            log, parts, tables = torch.cuda.log, [], []
            for _ in range(2):
                start = len(log)
                model(None)
                torch.autograd.run_backward()
                after_backward = len(log)
                grads = [n for n, p in model.named_parameters() if p.grad is not None]
                table = names(model, opt)
                opt.step()
                opt.zero_grad()
                parts.append(dict(backward=log[start:after_backward],
                                  step=log[after_backward:], grads=grads))
                tables.append(table)
            table = names(model, opt)
            for part in parts:
                part["trace"] = trace(part["backward"], table)
            holds, stats = sum(fake.holds.values()), dict(handle.backward_step.stats)
            hook_seconds = [handle.stats[f"{phase}_hook_seconds"]
                            for phase in ("forward", "backward", "gradient")]
            mapped = handle.backward_step.mapped
            pages = lambda t: set(range(t.data_ptr() // 4096,
                                        (t.data_ptr() + 4 * t.numel() - 1) // 4096 + 1))
            state = [t for p in model.parameters() for t in opt.state[p].values()]
            mapped_pages = set().union(*(pages(t) for t in state if t.data_ptr() in mapped))
            shared = [n for n, p in model.named_parameters() if pages(p) & mapped_pages] + [
                t.data_ptr() for t in state if t.data_ptr() not in mapped
                and pages(t) & mapped_pages]
            aligned = all(t.data_ptr() % 4096 == 0 for t in state if t.data_ptr() in mapped)
            handle.undo()
            model(None)
            torch.autograd.run_backward()  # after undo: no step in the backward pass
            print(json.dumps(dict(parts=parts, sides=sides, holds=holds, stats=stats,
                                  hook_seconds=hook_seconds, shared=shared, aligned=aligned,
                                  mapped=len(mapped),
                                  after=sum(fake.holds.values()),
                                  grads_after_undo=sum(p.grad is not None
                                                       for p in model.parameters()))))
            """))
        first, second = result["parts"]
        sides = result["sides"]
        steps = [e[1] for e in first["trace"] if e[0] == "step"]
        self.assertEqual(steps, [BLOCK["b2"], BLOCK["b1"], BLOCK["b0"], BLOCK["embed"]],
                         "a block's worth a chunk, in the backward pass's order; the tied "
                         "embedding once, when its last use accumulated it")
        entered = [e for e in first["backward"] if e[0] == "enter_stream"]
        self.assertEqual(entered, [["enter_stream", sides[k % 2]] for k in range(4)],
                         "the chunks alternate between the two step streams")
        self.assertEqual(first["grads"], [], "the gradients are let go after their step")
        state = [e for e in first["trace"] if e[0] == "will_access"]
        self.assertEqual(state, [
            ["will_access", "write", "remote_map", sorted(f"{k}:{n}" for n in BLOCK[b]
                                                          for k in ("exp_avg", "exp_avg_sq"))]
            for b in ("b2", "b1")] + [
            ["will_access", "write", "migrate", sorted(f"{k}:{n}" for n in BLOCK[b]
                                                       for k in ("exp_avg", "exp_avg_sq"))]
            for b in ("b0", "embed")], "the first layers' state resident, the rest mapped")
        for side in sides:
            self.assertIn(["wait_stream", 0, side], first["step"],
                          "optimizer.step(): the compute stream waits for the backward's steps")
        self.assertNotIn("optimizer.step", [e[0] for e in first["step"]], "nothing left to step")
        copies = [e for e in second["backward"] if e[0] == "copy"]
        self.assertEqual(len(copies), 2 * 2 * 2 * 3, "b2's and b1's moments in and back out")
        self.assertEqual([e[3] for e in copies], [sides[0]] * 12 + [sides[1]] * 12,
                         "each chunk's copies on its step stream (b2 then b1)")
        self.assertEqual([e[0] for e in second["trace"]], ["step"] * 4, "no plan after the first")
        self.assertEqual(result["stats"]["resident_state_bytes"], 3 * 2 * 16384 + 2 * 256)
        self.assertEqual(result["mapped"], 2 * 2 * 3, "b2's and b1's moments mapped")
        self.assertTrue(result["aligned"], "each mapped moment starts a page")
        self.assertEqual(result["shared"], [], "no parameter or resident state shares a page "
                         "with mapped state (a placement covers whole pages)")
        self.assertGreater(result["stats"]["own_pages_bytes"], 2 * 2 * (2 << 20),
                           "two buffers, each with its padding at both ends")
        self.assertEqual(result["holds"], 10 + 20, "parameters and state held until undo")
        self.assertEqual(result["after"], 0)
        self.assertEqual(result["grads_after_undo"], 10, "undo: gradients stay for a plain step")
        forward, backward, gradient = result["hook_seconds"]
        self.assertEqual(forward, 0.0, "static plans: no block hooks")
        self.assertGreater(backward, 0.0, "the end of the backward pass (its last chunk)")
        self.assertGreater(gradient, 0.0, "the gradients' hooks, the chunks' steps in them")

    def test_one_step_stream_takes_every_chunk_and_a_bad_count_changes_nothing(self):
        result = fresh(textwrap.dedent(self.RUN) + textwrap.dedent("""
            bs, refused = handle.backward_step, []
            for bad in (0, 3, True, 1.0):
                try:
                    bs.step_streams = bad
                except ValueError as e:
                    refused.append(str(e))
            kept = bs.step_streams
            bs.step_streams = 1
            log = torch.cuda.log
            start = len(log)
            model(None)
            torch.autograd.run_backward()
            entered = [e[1] for e in log[start:] if e[0] == "enter_stream"]
            opt.step()
            waits = [e for e in log[start:] if e[0] == "wait_stream" and e[1] == 0]
            print(json.dumps(dict(refused=refused, kept=kept, entered=entered, sides=sides,
                                  waits=len(waits))))
            """))
        self.assertEqual(len(result["refused"]), 4, result["refused"])
        self.assertTrue(all("step_streams must be 1 or 2" in e for e in result["refused"]))
        self.assertEqual(result["kept"], 2, "a refused count changes nothing")
        self.assertEqual(result["entered"], [result["sides"][0]] * 4,
                         "every chunk on the first step stream")
        self.assertGreaterEqual(result["waits"], 2, "the compute stream still waits for both")

    def test_a_strided_moment_is_mapped_where_it_is_and_keeps_its_layout(self):
        result = fresh(textwrap.dedent(self.RUN.replace(
            "        fake, model, opt = planned()\n",
            "        fake, model, opt = planned()\n"
            "        model.blocks[2].fc.weight._contiguous = False  # channels_last-like\n"))
            + textwrap.dedent("""
            step(model, opt)
            strided = list(opt.state[model.blocks[2].fc.weight].values())
            others = list(opt.state[model.blocks[2].proj.weight].values())
            mapped = handle.backward_step.mapped
            print(json.dumps(dict(
                strided_kept=[not t.is_contiguous() for t in strided],
                strided_mapped=[t.data_ptr() in mapped for t in strided],
                others_aligned=[t.data_ptr() % 4096 == 0 for t in others],
                others_mapped=[t.data_ptr() in mapped for t in others])))
            handle.undo()
            """))
        self.assertEqual(result["strided_kept"], [True, True], "not copied into own pages")
        self.assertEqual(result["strided_mapped"], [True, True], "mapped where it is")
        self.assertEqual(result["others_mapped"], [True, True])
        self.assertEqual(result["others_aligned"], [True, True], "the rest on own pages")

    def test_staging_copies_go_in_launches_of_at_most_slice_elements(self):
        """A multi-kernel (foreach) step stages mapped state through device buffers; the
        copies across the link go in launches of at most slice_elements, every element once
        each way."""
        result = fresh(textwrap.dedent(self.RUN) + textwrap.dedent("""
            handle.backward_step.slice_elements = 1024
            step(model, opt)  # makes the state; b2's and b1's is mapped from now on
            opt.zero_grad()
            log, start = torch.cuda.log, len(torch.cuda.log)
            step(model, opt)
            launches = [e[1] for e in log[start:] if e[0] == "foreach_copy"]
            copies = [e[1:] for e in log[start:] if e[0] == "copy"]
            mapped = sorted((t.data_ptr(), t.numel()) for p in model.parameters()
                            for t in opt.state[p].values()
                            if t.data_ptr() in handle.backward_step.mapped)
            handle.undo()
            print(json.dumps(dict(launches=launches, copies=copies, mapped=mapped, sides=sides,
                                  stage=handle.backward_step.stage)))
            """))
        self.assertTrue(result["stage"])
        totals = [sum(launch) for launch in result["launches"]]
        self.assertTrue(all(0 < total <= 1024 for total in totals), totals)
        # b2's and b1's moments (2 x (4096 + 4096 + 64) elements a block), in and back out
        self.assertEqual(sum(totals), 2 * 2 * 2 * (4096 + 4096 + 64))
        self.assertEqual(totals, ([1024] * 16 + [128]) * 4)
        # Each slice of mapped state copied into a device buffer and back from that buffer,
        # on a step stream, every slice of it once.
        mapped = lambda a: any(p <= a < p + 4 * n for p, n in result["mapped"])
        seen = {}
        for destination, source, stream in result["copies"]:
            self.assertIn(stream, result["sides"])
            self.assertNotEqual(mapped(destination), mapped(source),
                                "one side mapped, the other on the device")
            seen.setdefault(source if mapped(source) else destination, []).append(
                ("in", destination) if mapped(source) else ("out", source))
        self.assertEqual(sorted(seen), sorted(p + 4 * k for p, n in result["mapped"]
                                              for k in range(0, n, 1024)))
        for moves in seen.values():
            self.assertEqual([m[0] for m in moves], ["in", "out"])
            self.assertEqual(moves[0][1], moves[1][1], "back from the buffer it went into")

    def test_a_fused_step_over_mapped_state_is_sliced_on_its_step_stream(self):
        """A fused optimizer's chunks with mapped state step in launches of at most
        slice_elements, on the chunk's step stream (a chunk with any mapped state is sliced
        whole); chunks of resident state, and every chunk of the first step, which makes the
        state, in the optimizer's own launches."""
        result = fresh(textwrap.dedent("""
            fake = uma_fake_plans.install(path, torch.cuda.log)
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            model = Model()
            opt = torch.optim.AdamW(model.parameters(), fused=True)
            params = sum(p.numel() * 4 for p in model.parameters())
            rounding = 2 * 4096 * 3 * 10
            room = 3 * 2 * 16384 + 2 * 256  # the state of embed and of b0: b2's and b1's mapped
            handle = uma_torch.offload(model, opt, budget_bytes=params + rounding + room,
                                       step_in_backward=True, chunk_bytes=16000)
            bs = handle.backward_step
            bs.slice_elements = 1024
            sides = [stream.cuda_stream for stream in bs.streams]
            launches = []
            for _ in range(2):
                start = len(torch.cuda.log)
                step(model, opt)
                opt.zero_grad()
                launches.append([[sum(e[1]), e[2]] for e in torch.cuda.log[start:]
                                 if e[0] == "fused_adamw"])
            handle.undo()
            print(json.dumps(dict(launches=launches, stats=bs.stats, sides=sides,
                                  stage=bs.stage)))
            """))
        self.assertFalse(result["stage"], "a fused step is not staged")
        first, second = ([total for total, _ in step] for step in result["launches"])
        # Chunks of 16000 bytes as the gradients come (block by block from the last; in a
        # block proj.weight, fc.weight, fc.bias: 4096, 4096 and 64 elements): [b2.proj],
        # [b2.fc.weight], [b2.fc.bias, b1.proj], [b1.fc.weight], [b1.fc.bias, b0.proj],
        # [b0.fc.weight], [b0.fc.bias, embed]; b2's and b1's state mapped after the first step.
        self.assertEqual(first, [4096, 4096, 4160, 4096, 4160, 4096, 4160])
        self.assertEqual(second, [1024] * 8 + [1024, 1024, 1024, 1024, 64] + [1024] * 4 +
                         [1024, 1024, 1024, 1024, 64] + [4096, 4160])
        self.assertTrue(all(side in result["sides"] for step in result["launches"]
                            for _, side in step), "each launch on a step stream")
        self.assertEqual(result["stats"]["sliced_chunks"], 5)

    def test_a_parameter_the_optimizer_does_not_step_keeps_its_gradient(self):
        result = fresh(textwrap.dedent("""
            uma_fake_plans.install(path, torch.cuda.log)
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            model = Model()
            frozen = dict(model.named_parameters())["blocks.1.proj.weight"]
            opt = torch.optim.AdamW([p for p in model.parameters() if p is not frozen])
            handle = uma_torch.offload(model, opt, budget_bytes=1 << 20, step_in_backward=True,
                                       chunk_bytes=33000)
            start = len(torch.cuda.log)
            model(None)
            torch.autograd.run_backward()
            stepped = sorted(p for e in torch.cuda.log[start:] if e[0] == "optimizer.step"
                             for p in e[1])
            kept = [n for n, p in model.named_parameters() if p.grad is not None]
            opt.step()
            handle.undo()
            print(json.dumps(dict(kept=kept, frozen_stepped=frozen.data_ptr() in stepped,
                                  stepped=len(stepped))))
            """))
        self.assertEqual(result["kept"], ["blocks.1.proj.weight"])
        self.assertFalse(result["frozen_stepped"])
        self.assertEqual(result["stepped"], 9)

    def test_what_stepping_in_backward_cannot_honour_is_refused_by_name(self):
        result = fresh(textwrap.dedent(self.RUN) + textwrap.dedent("""
            out = {}
            def attempt(name, fn):
                try:
                    fn()
                    out[name] = "ran"
                except Exception as error:
                    out[name] = type(error).__name__ + ": " + str(error)
            model(None)
            torch.autograd.run_backward()
            model(None)
            attempt("accumulate", torch.autograd.run_backward)
            opt.zero_grad()  # the refused pass's first gradient (made before its hook ran)
            opt.step()
            step(model, opt)
            model(None)
            torch.autograd.run_backward()
            next(iter(model.parameters())).grad = torch.empty(4096, device="cuda")  # clipped
            attempt("grad_set", opt.step)
            opt.zero_grad()
            step(model, opt)
            attempt("kwargs", lambda: opt.step(grad_scaler=None))
            handle.undo()
            attempt("no_optimizer", lambda: uma_torch.offload(Model(), None,
                                                              budget_bytes=1 << 20,
                                                              step_in_backward=True))
            small = Model()
            attempt("no_room", lambda: uma_torch.offload(small, torch.optim.AdamW(
                small.parameters()), budget_bytes=200000, step_in_backward=True))
            print(json.dumps(dict(out=out, hooks=small.hook_count())))
            """))
        out = result["out"]
        self.assertIn("StepInBackwardError", out["accumulate"])
        self.assertIn("gradient accumulation", out["accumulate"])
        self.assertIn("have a gradient again at optimizer.step()", out["grad_set"])
        self.assertIn("grad_scaler", out["kwargs"])
        self.assertIn("step_in_backward needs the optimizer", out["no_optimizer"])
        self.assertIn("needs every parameter resident", out["no_room"])
        self.assertEqual(result["hooks"], 0, "a refused offload leaves no hook behind")


class SlicedFusedStepTest(unittest.TestCase):
    """backward_step.sliced(): a fused step over mapped state in launches of at most N
    elements, each element stepped exactly once, with its own parameter's step count."""

    def test_every_element_once_in_launches_of_at_most_the_limit_with_its_step(self):
        result = fresh("""
            from uma_torch.backward_step import sliced
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            sizes = [3000, 500, 10, 1024]
            lists = [[torch.empty(n, device="cuda") for n in sizes] for _ in range(4)]
            steps = [f"step{i}" for i in range(len(sizes))]
            launches = []

            def fused(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
                      **kwargs):
                launches.append(dict(
                    spans=[[t.data_ptr() for t in group] for group in
                           (params, grads, exp_avgs, exp_avg_sqs)],
                    counts=[t.numel() for t in params], steps=list(state_steps),
                    max=len(max_exp_avg_sqs), kwargs=kwargs))

            sliced(fused, 1024)(*lists, [], steps, lr=0.1, maximize=False)
            covered = [[[] for _ in sizes] for _ in range(4)]
            for launch in launches:
                for g, ptrs in enumerate(launch["spans"]):
                    for ptr, count, step in zip(ptrs, launch["counts"], launch["steps"]):
                        i = steps.index(step)
                        covered[g][i].append([(ptr - lists[g][i].data_ptr()) // 4, count])
            print(json.dumps(dict(totals=[sum(l["counts"]) for l in launches],
                                  covered=covered, kwargs=[l["kwargs"] for l in launches],
                                  max=[l["max"] for l in launches])))
            """)
        self.assertTrue(all(0 < total <= 1024 for total in result["totals"]),
                        f"every launch at most the limit: {result['totals']}")
        self.assertEqual(sum(result["totals"]), 3000 + 500 + 10 + 1024)
        for group in result["covered"]:  # params, grads, moments: the same cuts
            self.assertEqual(group, result["covered"][0])
        for spans, size in zip(result["covered"][0], [3000, 500, 10, 1024]):
            start = 0
            for offset, count in spans:  # consecutive slices of the tensor, with its step
                self.assertEqual(offset, start)
                start += count
            self.assertEqual(start, size, "every element once")
        self.assertTrue(all(k == {"lr": 0.1, "maximize": False} for k in result["kwargs"]))
        self.assertEqual(set(result["max"]), {0}, "no max_exp_avg_sqs without amsgrad")


    def test_a_strided_parameter_goes_whole_and_the_others_are_still_sliced(self):
        result = fresh("""
            from uma_torch.backward_step import sliced
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            lists = [[torch.empty(n, device="cuda") for n in (3000, 2000)] for _ in range(4)]
            lists[2][1]._contiguous = False  # the second parameter's first moment: strided
            launches = []
            sliced(lambda p, g, m, v, mx, steps, **kw: launches.append(
                [[t.numel() for t in p], steps]), 1024)(*lists, [], ["s0", "s1"], lr=0.1)
            print(json.dumps(launches))
            """)
        self.assertEqual(result[0], [[2000], ["s1"]], "the strided one whole, first")
        self.assertEqual(result[1:], [[[1024], ["s0"]], [[1024], ["s0"]], [[952], ["s0"]]])

    def test_a_strided_gradient_goes_whole_for_its_call_and_the_kept_plan_is_untouched(self):
        result = fresh("""
            from uma_torch.backward_step import PlanCache, sliced
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            lists = [[torch.empty(n, device="cuda") for n in (3000, 2000)] for _ in range(4)]
            cache, calls = PlanCache(), []
            for strided in (False, True, False):
                lists[1] = [torch.empty(n, device="cuda") for n in (3000, 2000)]
                lists[1][1]._contiguous = not strided
                launches = []
                sliced(lambda p, g, m, v, mx, steps, **kw: launches.append(
                    [[t.numel() for t in p], steps]), 1024, cache)(*lists, [], ["s0", "s1"],
                                                                    lr=0.1)
                calls.append(launches)
            print(json.dumps(dict(calls=calls, kept=len(cache))))
            """)
        sliced_both = [[[1024], ["s0"]], [[1024], ["s0"]], [[952], ["s0"]], [[1024], ["s1"]],
                       [[976], ["s1"]]]
        self.assertEqual(result["calls"][0], sliced_both)
        self.assertEqual(result["calls"][1], [[[2000], ["s1"]], [[1024], ["s0"]],
                                              [[1024], ["s0"]], [[952], ["s0"]]],
                         "the strided gradient's parameter whole, first; the other sliced")
        self.assertEqual(result["calls"][2], sliced_both, "the kept plan as before")
        self.assertEqual(result["kept"], 1)

    def test_plans_of_every_chunk_are_kept_however_many_and_a_sweep_forgets_the_unused(self):
        result = fresh("""
            from uma_torch.backward_step import PlanCache, sliced
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            chunks = [[[torch.empty(8, device="cuda")] for _ in range(4)] for _ in range(300)]
            cache = PlanCache()
            step = sliced(lambda *a, **k: None, 4, cache)
            for lists in chunks:  # a first pass: a plan each
                step(*lists, [], ["s"], lr=0.1)
            cache.sweep()
            kept = {key: plan for key, plan in cache.plans.items()}
            for lists in chunks:  # the next pass: every plan used again, none made anew
                step(*lists, [], ["s"], lr=0.1)
            again = sum(cache.plans[key] is plan for key, plan in kept.items())
            cache.sweep()
            for lists in chunks[:100]:  # a pass that steps a third of them
                step(*lists, [], ["s"], lr=0.1)
            cache.sweep()
            print(json.dumps(dict(first=len(kept), again=again, after=len(cache))))
            """)
        self.assertEqual(result["first"], 300, "no bound by count: one plan a chunk")
        self.assertEqual(result["again"], 300, "the next pass finds every plan")
        self.assertEqual(result["after"], 100, "a sweep forgets the plans its pass did not use")

    def test_kept_slices_follow_the_tensors_a_call_brings(self):
        """With a cache, a call's launches (the parameters' and their state's slices) are kept
        from call to call, but a call's gradients are always its own, and a plan whose state
        tensor was replaced since (own pages, a loaded state dict) or whose parameter's memory
        moved is made anew: no launch reaches memory the call did not bring."""
        result = fresh("""
            from uma_torch.backward_step import PlanCache, sliced
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            sizes = [3000, 500]
            lists = [[torch.empty(n, device="cuda") for n in sizes] for _ in range(4)]
            seen = []

            def fused(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
                      **kwargs):
                seen.append([sorted(t.data_ptr() for t in group)
                             for group in (params, grads, exp_avgs, exp_avg_sqs)])

            def spans(lists):  # every slice's first byte, per list, as sliced() must cut
                return [sorted(t.data_ptr() + 4 * start for t in group
                               for start in range(0, t.numel(), 1024)) for group in lists]

            cache, calls, reused = PlanCache(), [], []
            for turn in range(4):
                if turn == 1:
                    lists[1] = [torch.empty(n, device="cuda") for n in sizes]  # new gradients
                if turn == 2:
                    lists[2][1] = torch.empty(500, device="cuda")  # a moment replaced
                if turn == 3:  # the same object, its memory moved (param.data = ...)
                    lists[0][0]._storage = torch.empty(3000, device="cuda")._storage
                seen.clear()
                before = list(cache.plans.values()) if cache else None
                sliced(fused, 1024, cache)(*lists, [], ["s0", "s1"], lr=0.1)
                reused.append(before is not None and list(cache.plans.values())[0] is before[0])
                got = [sorted(p for launch in seen for p in launch[g]) for g in range(4)]
                calls.append(dict(got=got, want=spans(lists)))
            print(json.dumps(dict(calls=calls, kept=len(cache), reused=reused)))
            """)
        for turn, call in enumerate(result["calls"]):
            self.assertEqual(call["got"], call["want"], f"call {turn}: the call's own tensors")
        self.assertEqual(result["kept"], 1, "one plan for the call's parameters")
        self.assertEqual(result["reused"], [False, True, False, False],
                         "the plan kept for new gradients, made anew for a replaced moment and "
                         "for a parameter's moved memory")


class SlicingPatchTest(unittest.TestCase):
    """backward_step._Slicing: torch's fused step replaced while any thread steps with mapped
    state, slicing only on that thread, put back by the last user however they interleave."""

    def test_interleaved_users_slice_only_their_own_calls_and_the_last_one_restores(self):
        result = fresh("""
            import threading
            from uma_torch.backward_step import _Slicing
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            calls = []

            def original(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, **kw):
                calls.append([threading.current_thread().name, [t.numel() for t in params]])

            torch._fused_adamw_ = original
            lists = [[torch.empty(3000, device="cuda")] for _ in range(4)]
            step = lambda: torch._fused_adamw_(*lists, [], ["s"], lr=0.1)
            a_in, b_in, a_out, b_called = (threading.Event() for _ in range(4))
            seen = {}

            def a():
                cm = _Slicing.on(torch, 1024)
                cm.__enter__()
                a_in.set()
                b_in.wait()
                step()
                cm.__exit__(None, None, None)  # A leaves first; B is still inside
                seen["after_a"] = torch._fused_adamw_ is original
                a_out.set()

            def b():
                a_in.wait()
                with _Slicing.on(torch, 2000):
                    b_in.set()
                    a_out.wait()
                    step()
                    other = threading.Thread(target=step, name="other")
                    other.start()
                    other.join()
                b_called.set()

            threads = [threading.Thread(target=a, name="a"), threading.Thread(target=b, name="b")]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            restored = torch._fused_adamw_ is original
            try:
                with _Slicing.on(torch, -1):
                    pass
                refused = None
            except ValueError as error:
                refused = str(error)
            try:
                with _Slicing.on(torch, 100):
                    raise KeyError("in the step")
            except KeyError:
                pass
            print(json.dumps(dict(calls=calls, after_a=seen["after_a"], restored=restored,
                                  refused=refused, unchanged=torch._fused_adamw_ is original,
                                  users=_Slicing.users)))
            """)
        by_thread = {}
        for name, counts in result["calls"]:
            by_thread.setdefault(name, []).append(counts)
        self.assertEqual(by_thread["a"], [[1024], [1024], [952]], "A sliced at its own limit")
        self.assertEqual(by_thread["b"], [[2000], [1000]], "B sliced at its own limit")
        self.assertEqual(by_thread["other"], [[3000]], "another thread passes through whole")
        self.assertFalse(result["after_a"], "still replaced while B steps")
        self.assertTrue(result["restored"], "the last user put the original back")
        self.assertIn("at least 1 element", result["refused"])
        self.assertTrue(result["unchanged"], "a refused limit or a raising step changes nothing")
        self.assertEqual(result["users"], 0)


class OffloadWithTheLibrarysPlansTest(unittest.TestCase):
    """Against libuma_c.so's own plan calls (host backend, its emulated device), where it has
    them; skipped before."""

    def test_static_and_block_plans_keep_the_budget_and_undo_ends_every_plan(self):
        result = fresh("""
            if not uma_c.binding.has_plans(uma_c.library(path)[1]):
                print(json.dumps(dict(skip=True))); sys.exit(0)
            uma_torch.install(backend="host", quota_bytes=256 << 20)
            out = {}
            for policy in ("auto", "dynamic", "migrate"):
                model = Model(layers=6, n=256)
                opt = torch.optim.AdamW(model.parameters())
                state = 16 * sum(p.numel() for p in model.parameters())
                handle = uma_torch.offload(model, opt, budget_bytes=state // 3, policy=policy,
                                           chunk_bytes=state // 12)
                step(model, opt)
                opt.zero_grad()
                warm = uma_torch.residency()
                for _ in range(2):
                    step(model, opt)
                    opt.zero_grad()
                report = uma_torch.residency()
                handle.undo()
                out[policy] = dict(
                    static=handle.static, budget=state // 3,
                    device=report["devices"][0],
                    moved_after_warmup=report["to_device_bytes"] - warm["to_device_bytes"]
                    + report["to_host_bytes"] - warm["to_host_bytes"],
                    held_after=uma_torch.residency()["devices"][0]["held_bytes"])
            print(json.dumps(out))
            """)
        if result.get("skip"):
            self.skipTest("this libuma_c.so has no plan calls yet (issue 25)")
        for policy, run in result.items():
            self.assertEqual(run["device"]["budget_bytes"], run["budget"], policy)
            self.assertLessEqual(run["device"]["peak_bytes"], run["budget"], policy)
            self.assertEqual(run["held_after"], 0, f"{policy}: undo ended every plan")
        self.assertTrue(result["auto"]["static"])
        self.assertEqual(result["auto"]["moved_after_warmup"], 0,
                         "static plans: nothing moves after the first step")
        self.assertGreater(result["migrate"]["moved_after_warmup"], 0,
                           "a third of the state streams through the budget under migrate")


class OffloadRefusalTest(unittest.TestCase):
    def test_without_install_offload_refuses_and_says_what_to_do(self):
        result = fresh("""
            model = Model()  # PyTorch's own allocator (the stand-in's native memory)
            try:
                uma_torch.offload(model, budget_bytes=1 << 20)
                outcome = "offloaded"
            except uma_torch.OffloadError as error:
                outcome = str(error)
            print(json.dumps(dict(outcome=outcome, hooks=model.hook_count())))
            """)
        self.assertIn("uma_torch.pool()", result["outcome"])
        self.assertIn("uma_torch.install()", result["outcome"])
        self.assertEqual(result["hooks"], 0)

    def test_a_model_allocated_by_another_allocator_is_refused_and_nothing_stays_changed(self):
        result = fresh("""
            fake = uma_fake_plans.install(path, torch.cuda.log)
            model = Model()  # on the device before uma was installed
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            try:
                uma_torch.offload(model, budget_bytes=1 << 20)
                outcome = "offloaded"
            except uma_torch.OffloadError as error:
                outcome = str(error)
            budgets = [e[2] for e in torch.cuda.log if e[0] == "set_device_budget"]
            print(json.dumps(dict(outcome=outcome, hooks=model.hook_count(), budgets=budgets,
                                  memory=fake.memory)))
            """)
        self.assertIn("parameter 'embed.weight' is not in memory uma handed out",
                      result["outcome"])
        self.assertIn("another allocator", result["outcome"])
        self.assertEqual(result["hooks"], 0)
        self.assertEqual(result["budgets"], [1 << 20, result["memory"]], "the budget went back")

    def test_bad_budgets_policies_devices_and_a_second_offload_are_refused(self):
        result = fresh("""
            fake, model, _ = planned(optimizer=False)
            outcomes = []
            for kwargs in (dict(budget_bytes=0), dict(budget_bytes="2G"), dict(),
                           dict(budget_bytes=1 << 50), dict(budget_bytes=1, policy="fast"),
                           dict(budget_bytes=1, policy={"moments": "migrate"}),
                           dict(budget_bytes=1, policy={"gradients": "discard"}),
                           dict(budget_bytes=1, lookahead=-1)):
                try:
                    uma_torch.offload(model, **kwargs)
                    outcomes.append("offloaded")
                except (TypeError, ValueError, uma_c.UmaError) as error:
                    outcomes.append(type(error).__name__)
            unchanged = model.hook_count() == 0 and not fake.budgets
            cpu = Model(device="cpu")
            try:
                uma_torch.offload(cpu, budget_bytes=1 << 20)
            except uma_torch.OffloadError as error:
                outcomes.append("on cpu" in str(error))
            handle = uma_torch.offload(model, budget_bytes=1 << 20)
            try:
                uma_torch.offload(model, budget_bytes=1 << 20)
            except uma_torch.OffloadError as error:
                outcomes.append("offloaded already" in str(error))
            print(json.dumps(dict(outcomes=outcomes, unchanged=unchanged)))
            """)
        self.assertEqual(result["outcomes"], [
            "ValueError", "TypeError", "TypeError", "UmaError", "ValueError", "ValueError",
            "ValueError", "ValueError", True, True])
        self.assertTrue(result["unchanged"], "no hook and no budget after the refusals")


if __name__ == "__main__":
    unittest.main()
