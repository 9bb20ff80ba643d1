"""uma_torch.offload(model, budget_bytes=B) without an optimizer (issue 39: inference beyond the
device budget, python/uma_torch/streaming.py) against the stand-in torch (fakes/torch: modules
with hooks, .data, as_tensor, streams and events that log) and the stand-in tiers and plans
(fakes/uma_fake_tiers.py over uma_fake_plans.py: bytes copied for real): which layers stay
resident for a budget, the refusals, a streamed forward computing what the model computes in
memory, the stream order of every copy, undo; and once against libuma_c.so's own tiers and
plans where it has them (skipped before)."""

import textwrap
import unittest

from support import library_path, run_fresh

PRELUDE = """
    import ctypes, json, os, random, sys, zlib
    import uma_c, uma_torch, uma_fake_tiers
    import torch
    from uma_torch import stream_partition
    path = os.environ["UMA_LIBRARY"]

    def contents(t):
        return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())

    def mix(*values):
        return zlib.crc32(repr(values).encode())

    class Block(torch.nn.Module):
        # what a layer computes depends on every byte of its parameters where it reads them
        def __init__(self, n, name):
            super().__init__()
            self.fc = torch.nn.Linear(n, n)
            self.proj = torch.nn.Linear(n, n, bias=False)
            self.name = name

        def forward(self, x):
            params = [self.fc.weight, self.fc.bias, self.proj.weight]
            torch.cuda.log.append(("forward", self.name, [p.data_ptr() for p in params]))
            return mix(x, *[zlib.crc32(contents(p)) for p in params])

    class Model(torch.nn.Module):
        # embed, `layers` layers in a ModuleList, a final norm, a head tied to embed
        def __init__(self, layers=12, n=64):
            super().__init__()
            self.embed = torch.nn.Linear(n, n, bias=False)
            self.blocks = torch.nn.ModuleList([Block(n, f"blocks.{i}") for i in range(layers)])
            self.norm = torch.nn.Linear(n, 1)
            self.head = torch.nn.Linear(n, n, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, x):
            x = mix(x, zlib.crc32(contents(self.embed.weight)))
            for block in self.blocks:
                x = block(x)
            return mix(x, zlib.crc32(contents(self.norm.weight)),
                       zlib.crc32(contents(self.head.weight)))

    def fill(model, seed=1):
        # random bytes in every parameter (never zeros: a copy that did not happen shows)
        rng = random.Random(seed)
        for p in model.parameters():
            n = p.numel() * p.element_size()
            ctypes.memmove(p.data_ptr(), rng.randbytes(n), n)

    def snapshot(model):
        return {name: (tuple(p.shape), p.dtype, contents(p))
                for name, p in model.named_parameters()}

    def setup(layers=12, n=64):
        # the stand-in tiers and plans, uma installed (host backend), a filled Model
        fake = uma_fake_tiers.install(path, torch.cuda.log)
        uma_torch.install(backend="host", quota_bytes=64 << 20)
        model = Model(layers, n)
        fill(model)
        return fake, model

    def whole(model):
        # the budget that holds the whole model resident: what planning all of it is charged
        return stream_partition.planned_bytes(list(model.parameters()))

    def expected_resident_layers(model, budget):
        # the rule: the most layers, first ones first, such that the resident plan and two
        # staging buffers for the largest streamed layer (each parameter at a multiple of 256
        # bytes, the buffer in whole pages) fit the budget
        fixed = [model.embed.weight, model.norm.weight, model.norm.bias]
        layers = [[b.fc.weight, b.fc.bias, b.proj.weight] for b in model.blocks]
        size = lambda ps: sum(-(-p.numel() * p.element_size() // 256) * 256 for p in ps)
        for kept in range(len(layers), -1, -1):
            rest = layers[kept:]
            staging = min(2, len(rest)) * (-(-max(map(size, rest)) // 4096) * 4096
                                           if rest else 0)
            resident = fixed + [p for ps in layers[:kept] for p in ps]
            if stream_partition.planned_bytes(resident) + staging <= budget:
                return kept
        return None

    def copies(log, start=0):
        return [e for e in log[start:] if e[0] == "uma_copy"]
"""


def fresh(code):
    library_path()
    return run_fresh(textwrap.dedent(PRELUDE) + textwrap.dedent(code), fakes=True)[0]


class PartitionTest(unittest.TestCase):
    def test_the_first_layers_that_fit_stay_resident_across_a_budget_sweep(self):
        result = fresh("""
            fake, model = setup()
            total, out = whole(model), {}
            for fraction in (1.0, 0.5, 0.33):
                budget = int(total * fraction)
                expected = expected_resident_layers(model, budget)
                handle = uma_torch.offload(model, budget_bytes=budget)
                device = uma_torch.residency()["devices"][0]
                out[str(fraction)] = dict(
                    kind=type(handle).__name__, streamed=handle.streamed,
                    resident_layers=handle.stats["resident_layers"], expected=expected,
                    needed=handle.stats["resident_bytes"] + handle.stats["staging_bytes"],
                    budget=budget, budget_set=device["budget_bytes"],
                    held=device["held_bytes"], peak=fake._inner.peak)
                handle.undo()
                fake._inner.peak = 0
            print(json.dumps(out))
            """)
        self.assertEqual(result["1.0"]["streamed"], [], "the whole model fits: nothing streams")
        self.assertEqual(result["1.0"]["resident_layers"], 12)
        for fraction, run in result.items():
            self.assertEqual(run["kind"], "StreamedInference", fraction)
            kept = run["expected"]
            self.assertEqual(run["resident_layers"], kept, fraction)
            self.assertEqual(run["streamed"], [f"blocks.{i}" for i in range(kept, 12)],
                             f"{fraction}: the layers after the resident ones stream")
            self.assertLessEqual(run["needed"], run["budget"], fraction)
            self.assertEqual(run["budget_set"], run["budget"], fraction)
            self.assertLessEqual(run["held"], run["budget"], fraction)
            self.assertLessEqual(run["peak"], run["budget"], fraction)
        self.assertTrue(0 < result["0.33"]["resident_layers"] < result["0.5"]["resident_layers"]
                        < 12, "a smaller budget keeps fewer layers resident")

    def test_a_budget_below_the_resident_part_and_two_staging_buffers_is_refused(self):
        result = fresh("""
            fake, model = setup()
            before, start = snapshot(model), len(torch.cuda.log)
            try:
                uma_torch.offload(model, budget_bytes=50000)
                outcome = "offloaded"
            except uma_torch.OffloadError as error:
                outcome = str(error)
            calls = [e[0] for e in torch.cuda.log[start:]]
            unchanged = snapshot(model) == before
            again = type(uma_torch.offload(model, budget_bytes=whole(model))).__name__
            print(json.dumps(dict(outcome=outcome, calls=calls, unchanged=unchanged,
                                  hooks=model.hook_count(), blocks=len(fake.blocks),
                                  again=again)))
            """)
        self.assertIn("a budget of 50000 bytes cannot run this model", result["outcome"])
        self.assertRegex(result["outcome"], r"needs at least \d+ bytes")
        self.assertIn("2 staging buffer(s)", result["outcome"])
        self.assertEqual(result["calls"], [], "no budget set, no plan, nothing allocated")
        self.assertTrue(result["unchanged"])
        self.assertEqual((result["hooks"], result["blocks"]), (0, 0))
        self.assertEqual(result["again"], "StreamedInference", "nothing stayed offloaded")

    def test_tied_weights_across_layers_stay_resident_and_the_rest_of_the_layer_streams(self):
        result = fresh("""
            fake, model = setup()
            model.blocks[11].proj.weight = model.blocks[10].proj.weight
            reference = model(0)
            handle = uma_torch.offload(model, budget_bytes=int(whole(model) * 0.33))
            resident = {id(p) for p in handle.resident}
            with torch.no_grad():
                outputs = [model(0) for _ in range(3)]
            print(json.dumps(dict(
                tied=id(model.blocks[10].proj.weight) in resident,
                streams="blocks.11" in handle.streamed,
                fc_resident=id(model.blocks[11].fc.weight) in resident,
                same=outputs == [reference] * 3)))
            """)
        self.assertEqual(result, dict(tied=True, streams=True, fc_resident=False, same=True))


class StreamedForwardTest(unittest.TestCase):
    def test_a_streamed_forward_computes_what_the_model_computes_in_memory(self):
        result = fresh("""
            fake, model = setup()
            reference = model(7)
            handle = uma_torch.offload(model, budget_bytes=int(whole(model) * 0.33))
            between = {n: p.numel() for n, p in model.named_parameters()}
            with torch.no_grad():
                outputs = [model(7) for _ in range(4)]
            layer = handle.layers[0]
            print(json.dumps(dict(
                same=outputs == [reference] * 4, streamed=len(handle.streamed),
                placeholders=sorted({between[n] for n in between
                                     if n.rsplit(".", 2)[0] in handle.streamed}),
                stats=handle.stats, host=fake.counters["host_tier_bytes"],
                device=fake.counters["device_tier_bytes"], layer_bytes=layer.nbytes,
                offsets=layer.offsets)))
            """)
        self.assertTrue(result["same"], "every forward computes the in-memory result")
        self.assertEqual(result["placeholders"], [0], "streamed parameters hold no memory between "
                         "forwards")
        streamed, stats = result["streamed"], result["stats"]
        self.assertEqual(stats["streamed_blocks"], streamed)
        self.assertEqual(stats["forwards"], 4)
        # One copy a layer a forward; the first forward also copies the first two layers before
        # it (the ones after send them ahead for the next pass).
        self.assertEqual(stats["copies"], 4 * streamed + 2)
        self.assertEqual(result["offsets"], [0, 16384, 16640], "each parameter 256-aligned")
        self.assertEqual(stats["streamed_bytes"], streamed * result["layer_bytes"])
        self.assertEqual(result["host"], stats["streamed_bytes"], "one host buffer a layer")
        self.assertEqual(result["device"], stats["staging_bytes"], "two staging buffers")

    def test_every_copy_waits_for_its_buffers_last_reader_and_every_reader_for_its_copy(self):
        result = fresh("""
            fake, model = setup(layers=9)
            # an odd count of streamed layers, three or more: the buffers' turns wrap unevenly
            budgets = [int(whole(model) * f / 100) for f in range(20, 100)]
            budget = next(b for b in budgets if expected_resident_layers(model, b) in (2, 4, 6))
            handle = uma_torch.offload(model, budget_bytes=budget)
            copy_stream, staging = handle.copy_stream.cuda_stream, handle.staging
            size = handle.buffer_bytes
            buffer_of = lambda ptr: next((b for b in staging if b <= ptr < b + size), None)
            start = len(torch.cuda.log)
            with torch.no_grad():
                for _ in range(3):
                    model(0)
            log = torch.cuda.log[start:]
            recorded, last_read, last_copy, problems = {}, {}, {}, []
            waited_by_copies, waited_by_compute = [], []
            for i, e in enumerate(log):
                if e[0] == "record":
                    recorded[e[2]] = (e[1], i)
                elif e[0] == "wait_event" and e[1] == copy_stream:
                    waited_by_copies.append(recorded[e[2]])
                elif e[0] == "wait_event" and e[1] == 0:
                    waited_by_compute.append((recorded[e[2]], log[i - 1]))
                elif e[0] == "uma_copy":
                    b = buffer_of(e[1])
                    if e[4] != copy_stream or b is None or e[3] != handle.layers[0].nbytes:
                        problems.append(["not a whole layer into staging on the copy stream", e])
                        continue
                    if b in last_read:  # a layer read this buffer before: the copy waits for
                        stream, at = waited_by_copies[-1]  # an event recorded after that read
                        if stream != 0 or at < last_read[b]:
                            problems.append(["copy before its buffer's reader finished", i])
                    last_copy[b] = i
                elif e[0] == "forward" and buffer_of(e[2][0]) is not None:
                    b = buffer_of(e[2][0])
                    (stream, at), before = waited_by_compute[-1]
                    if stream != copy_stream or at < last_copy.get(b, -1) or \\
                            before[:2] != ("record", 0):
                        problems.append(["a layer read its buffer before its copy", i])
                    last_read[b] = i
            print(json.dumps(dict(problems=problems, streamed=len(handle.streamed),
                                  copies=len(copies(log)))))
            """)
        self.assertEqual(result["problems"], [])
        self.assertEqual(result["streamed"] % 2, 1, "the uneven case")
        self.assertEqual(result["copies"], 3 * result["streamed"] + 2,
                         "one a layer a forward, and the first two before the first forward")

    def test_exposed_transfer_is_how_late_each_copy_ended_for_the_last_forward(self):
        result = fresh("""
            fake, model = setup()
            handle = uma_torch.offload(model, budget_bytes=int(whole(model) * 0.5))
            compute = torch.cuda.current_stream()
            out = {"before": handle.exposed_transfer_ms()}
            with torch.no_grad():
                handle.copy_stream.clock_ms = 2.5  # every copy ends 2.5 ms after compute is there
                model(0)
                out["late"] = handle.exposed_transfer_ms()
                handle.copy_stream.clock_ms, compute.clock_ms = 1.0, 4.0  # copies ended before
                model(0)
                out["early"] = handle.exposed_transfer_ms()
            compute.clock_ms = 0.0
            out["streamed"] = len(handle.streamed)
            print(json.dumps(out))
            """)
        self.assertEqual(result["before"], 0.0)
        self.assertAlmostEqual(result["late"], 2.5 * result["streamed"])
        self.assertEqual(result["early"], 0.0, "a copy that ended in time exposes nothing")

    def test_no_copy_when_the_budget_covers_the_model_and_the_plan_holds_every_parameter(self):
        result = fresh("""
            fake, model = setup()
            reference, start = model(0), len(torch.cuda.log)
            handle = uma_torch.offload(model, budget_bytes=whole(model))
            with torch.no_grad():
                same = model(0) == reference
            plans = [e for e in torch.cuda.log[start:] if e[0] == "will_access"]
            held = sum(fake._inner.holds.values())
            names = {p.data_ptr(): n for n, p in model.named_parameters()}
            handle.undo()
            print(json.dumps(dict(
                same=same, copies=len(copies(torch.cuda.log, start)), tiers=dict(fake.counters),
                layer_copies=handle.stats["copies"], streamed=handle.streamed,
                planned=sorted(names.get(p, hex(p)) for p, _ in plans[0][1]),
                options=[plans[0][2]["mode"], plans[0][2]["policy"]], plans=len(plans),
                held=held, held_after=sum(fake._inner.holds.values()))))
            """)
        self.assertTrue(result["same"])
        self.assertEqual((result["copies"], result["layer_copies"]), (0, 0), "nothing copied")
        self.assertEqual(result["tiers"]["host_tier_bytes"] + result["tiers"]["device_tier_bytes"],
                         0, "nothing allocated in the tiers")
        self.assertEqual(result["streamed"], [])
        self.assertEqual(result["plans"], 1, "one plan, at offload")
        self.assertEqual(len(result["planned"]), 12 * 3 + 3, "every parameter once (the head's "
                         "tied weight is embed's)")
        self.assertEqual(result["options"], ["read", "migrate"])
        self.assertEqual((result["held"], result["held_after"]), (39, 0),
                         "held until undo")

    def test_a_forward_that_autograd_records_is_refused_and_the_model_still_runs_after(self):
        result = fresh("""
            fake, model = setup()
            reference = model(0)
            handle = uma_torch.offload(model, budget_bytes=int(whole(model) * 0.5))
            try:
                model(0)
                outcome = "ran"
            except uma_torch.StreamingError as error:
                outcome = str(error)
            with torch.no_grad():
                after = model(0) == reference
            for p in model.parameters():
                p.requires_grad = False
            frozen = model(0) == reference  # nothing to record: runs with grad enabled
            print(json.dumps(dict(outcome=outcome, after=after, frozen=frozen)))
            """)
        self.assertIn("torch.no_grad()", result["outcome"])
        self.assertIn("pass an optimizer", result["outcome"])
        self.assertTrue(result["after"])
        self.assertTrue(result["frozen"])


class UndoTest(unittest.TestCase):
    def test_undo_restores_every_parameters_bytes_and_frees_every_buffer(self):
        result = fresh("""
            fake, model = setup()
            before, reference = snapshot(model), model(3)
            with uma_torch.offload(model, budget_bytes=int(whole(model) * 0.33)) as handle:
                with torch.no_grad():
                    model(3)
                    model(3)
                hooks = model.hook_count()
            restored = snapshot(model) == before
            budgets = [e[2] for e in torch.cuda.log if e[0] == "set_device_budget"]
            out = dict(hooks=hooks, hooks_after=model.hook_count(), restored=restored,
                       blocks=len(fake.blocks), tiers=dict(fake.counters),
                       held=sum(fake._inner.holds.values()), budgets=budgets,
                       memory=fake._inner.memory, same=model(3) == reference)
            calls = len(torch.cuda.log)
            handle.undo()  # a second undo does nothing
            out["second"] = torch.cuda.log[calls:]
            again = uma_torch.offload(model, budget_bytes=int(whole(model) * 0.5))
            with torch.no_grad():
                out["again"] = model(3) == reference
            print(json.dumps(out))
            """)
        self.assertGreater(result["hooks"], 0)
        self.assertEqual(result["hooks_after"], 0)
        self.assertTrue(result["restored"], "every parameter's shape, dtype and bytes")
        self.assertEqual(result["blocks"], 0, "every host and staging buffer freed")
        self.assertEqual(result["tiers"]["host_tier_bytes"], 0)
        self.assertEqual(result["tiers"]["device_tier_bytes"], 0)
        self.assertEqual(result["held"], 0, "the resident plan ended")
        self.assertEqual(result["budgets"][-1], result["memory"], "the budget back to none")
        self.assertTrue(result["same"])
        self.assertEqual(result["second"], [], "a second undo does nothing")
        self.assertTrue(result["again"])

    def test_a_layer_in_another_allocators_memory_is_refused_and_the_layers_before_restored(self):
        result = fresh("""
            fake = uma_fake_tiers.install(path, torch.cuda.log)
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            model = Model()
            fill(model)
            foreign = model.blocks[11].proj.weight
            start = foreign.data_ptr()
            fake._inner.foreign.append((start, start + foreign.numel() * 4))
            before = snapshot(model)
            try:
                uma_torch.offload(model, budget_bytes=int(whole(model) * 0.33))
                outcome = "offloaded"
            except uma_torch.OffloadError as error:
                outcome = str(error)
            print(json.dumps(dict(outcome=outcome, restored=snapshot(model) == before,
                                  blocks=len(fake.blocks), hooks=model.hook_count(),
                                  held=sum(fake._inner.holds.values()),
                                  copied_out=fake.counters["copy_to_host_bytes"] > 0)))
            """)
        self.assertIn("parameter 'blocks.11.proj.weight' is not in memory uma handed out",
                      result["outcome"])
        self.assertTrue(result["copied_out"], "the layers before it had moved to the host tier")
        self.assertTrue(result["restored"], "and came back")
        self.assertEqual((result["blocks"], result["hooks"], result["held"]), (0, 0, 0))


class RoutingAndRefusalTest(unittest.TestCase):
    def test_an_optimizer_another_policy_or_no_tiers_keep_the_plans_path(self):
        result = fresh("""
            fake, model = setup()
            kinds = []
            for kwargs in (dict(optimizer=torch.optim.AdamW(model.parameters())),
                           dict(policy="migrate"), dict()):
                handle = uma_torch.offload(model, budget_bytes=whole(model), **kwargs)
                kinds.append(type(handle).__name__)
                handle.undo()
            uma_torch.allocator()._lib = fake._inner  # the plans alone: a library without tiers
            handle = uma_torch.offload(model, budget_bytes=whole(model))
            print(json.dumps(dict(kinds=kinds, without=type(handle).__name__)))
            """)
        self.assertEqual(result["kinds"], ["Offload", "Offload", "StreamedInference"])
        self.assertEqual(result["without"], "Offload")

    def test_bad_arguments_a_cpu_model_and_a_second_offload_are_refused(self):
        result = fresh("""
            fake, model = setup()
            outcomes = []
            for kwargs in (dict(budget_bytes=0), dict(budget_bytes="2G"), dict(),
                           dict(budget_bytes=1 << 50)):
                try:
                    uma_torch.offload(model, **kwargs)
                    outcomes.append("offloaded")
                except (TypeError, ValueError, uma_c.UmaError) as error:
                    outcomes.append(type(error).__name__)
            unchanged = model.hook_count() == 0 and not fake.blocks
            cpu = Model()
            for p in cpu.parameters():
                p.device, p.is_cuda = torch.device("cpu"), False
            try:
                uma_torch.offload(cpu, budget_bytes=1 << 20)
            except uma_torch.OffloadError as error:
                outcomes.append("on cpu" in str(error))
            handle = uma_torch.offload(model, budget_bytes=int(whole(model) * 0.5))
            try:
                uma_torch.offload(model, budget_bytes=1 << 20)
            except uma_torch.OffloadError as error:
                outcomes.append("offloaded already" in str(error))
            print(json.dumps(dict(outcomes=outcomes, unchanged=unchanged)))
            """)
        self.assertEqual(result["outcomes"], ["ValueError", "TypeError", "TypeError", "UmaError",
                                              True, True])
        self.assertTrue(result["unchanged"])

    def test_a_model_allocated_by_another_allocator_is_refused_and_nothing_stays_changed(self):
        result = fresh("""
            fake = uma_fake_tiers.install(path, torch.cuda.log)
            model = Model()  # on the device before uma was installed
            uma_torch.install(backend="host", quota_bytes=64 << 20)
            try:
                uma_torch.offload(model, budget_bytes=1 << 20)
                outcome = "offloaded"
            except uma_torch.OffloadError as error:
                outcome = str(error)
            budgets = [e[2] for e in torch.cuda.log if e[0] == "set_device_budget"]
            print(json.dumps(dict(outcome=outcome, hooks=model.hook_count(), budgets=budgets)))
            """)
        self.assertIn("parameter 'embed.weight' is not in memory uma handed out",
                      result["outcome"])
        self.assertEqual((result["hooks"], result["budgets"]), (0, []))


class WithTheLibrarysTiersTest(unittest.TestCase):
    """Against libuma_c.so's own tiers, copies and plans (host backend, its emulated device),
    where it has them; skipped before."""

    def test_a_streamed_model_computes_in_budget_and_undo_restores_it(self):
        result = fresh("""
            lib = uma_c.library(path)[1]
            if not (uma_c.binding.has_tiers(lib) and uma_c.binding.has_plans(lib)):
                print(json.dumps(dict(skip=True))); sys.exit(0)
            uma_torch.install(backend="host", quota_bytes=256 << 20)
            model = Model(layers=12, n=128)
            fill(model)
            before, reference = snapshot(model), model(5)
            out = {}
            for fraction in (0.33, 0.5, 1.0):  # the report's peak is the process's: rising
                budget = int(whole(model) * fraction)
                start = uma_torch.stats()
                handle = uma_torch.offload(model, budget_bytes=budget)
                with torch.no_grad():
                    same = [model(5) == reference for _ in range(3)]
                report = uma_torch.residency()
                handle.undo()
                stats = uma_torch.stats()
                out[str(fraction)] = dict(
                    same=same, streamed=len(handle.streamed), budget=budget,
                    device=report["devices"][0], copies=stats["copies"] - start["copies"],
                    layer_copies=handle.stats["copies"],
                    restored=snapshot(model) == before,
                    tiers_after=[uma_torch.stats()[k] for k in ("host_tier_bytes",
                                                                "device_tier_bytes")],
                    held_after=uma_torch.residency()["devices"][0]["held_bytes"])
            print(json.dumps(out))
            """)
        if result.get("skip"):
            self.skipTest("this libuma_c.so has no tiers yet (issue 39)")
        self.assertEqual(result["1.0"]["streamed"], 0)
        self.assertEqual(result["1.0"]["copies"], 0, "nothing copied when the model fits")
        self.assertGreater(result["0.33"]["streamed"], result["0.5"]["streamed"])
        for fraction, run in result.items():
            self.assertEqual(run["same"], [True] * 3, fraction)
            self.assertLessEqual(run["device"]["peak_bytes"], run["budget"], fraction)
            self.assertEqual(run["device"]["budget_bytes"], run["budget"], fraction)
            self.assertTrue(run["restored"], fraction)
            self.assertEqual(run["tiers_after"], [0, 0], fraction)
            self.assertEqual(run["held_after"], 0, fraction)
            if run["streamed"]:
                # out at offload and in at undo, one each a parameter; one a layer a forward
                self.assertEqual(run["copies"], run["layer_copies"] + 2 * 3 * run["streamed"],
                                 fraction)


if __name__ == "__main__":
    unittest.main()
