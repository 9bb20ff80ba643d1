"""A stand-in for the C ABI's plan calls (SPEC25: uma_set_device_budget, uma_will_access,
uma_done_with, uma_dead, uma_sequence_*, uma_get_residency, uma_residency_json) in Python, over
the real libuma_c.so for everything else, until the library has them. It receives exactly the
ctypes arguments uma_c's binding passes, decodes them, logs each call to `log` and keeps a small
account: a budget per device, held ranges, LRU eviction, refusals with the C statuses.

    fake = uma_fake_plans.install(path)   # uma_c.library(path) now returns the fake

The stand-in is a library without the tiers of issue 39 (uma_host_alloc, ...: hidden even where
the real library has them), so that offload() without an optimizer keeps the plans' path the
offload tests exercise; fakes/uma_fake_tiers.py puts stand-in tiers over it. Device memory
those stand-ins hand out is charged here (`tier_bytes`), beside the plans.
"""

import ctypes
import json

import uma_c
from uma_c import binding

OK, INVALID, QUOTA, NO_DEVICE, UNKNOWN = 0, 3, 2, 7, 64
POLICY_NAMES = {v: k for k, v in binding.RESIDENCY_POLICIES.items()}
MODE_NAMES = {v: k for k, v in binding.ACCESS_MODES.items()}


def _obj(ref):
    """The ctypes object behind a byref() argument (or a pointer)."""
    obj = getattr(ref, "_obj", None)
    return obj if obj is not None else ref.contents


class FakePlans:
    def __init__(self, real, log=None, devices=1, memory=1 << 40):
        self._real = real
        self.log = log if log is not None else []
        self.devices, self.memory = devices, memory
        self.budgets = {}
        self.holds, self.resident, self.last_use = {}, {}, {}
        self.clock, self.peak, self.error = 0, 0, None
        self.foreign = []  # (start, end) ranges refused with UMA_ERR_UNKNOWN_POINTER
        self.sequences = {}
        self.tier_bytes = 0  # device memory of the tiers' stand-in, charged to the budget

    def __getattr__(self, name):
        if name in binding.TIER_PROTOTYPES:
            raise AttributeError(f"the stand-in plan library has no {name} (see the module)")
        return getattr(self._real, name)

    def held_bytes(self, extra=()):
        """Bytes the budget holds: resident ranges in a plan (or in `extra`) and device
        memory."""
        return sum(n for r, n in self.resident.items() if self.holds.get(r) or r in extra) \
            + self.tier_bytes

    def _fail(self, status, message):
        self.error = message.encode()
        return status

    def uma_last_error(self):
        error, self.error = self.error, None  # a later failure of the real library is its own
        return error if error is not None else self._real.uma_last_error()

    def uma_plan_options_init(self, ref):
        options = _obj(ref)
        ctypes.memset(ctypes.addressof(options), 0, ctypes.sizeof(options))
        options.struct_size = ctypes.sizeof(options)
        options.policy = binding.RESIDENCY_POLICIES["auto"]

    def uma_set_device_budget(self, handle, device, nbytes):
        self.log.append(("set_device_budget", device, nbytes))
        if not 0 <= device < self.devices:
            return self._fail(NO_DEVICE, f"device {device} does not exist")
        if not 1 <= nbytes <= self.memory:
            return self._fail(INVALID, f"budget {nbytes} is outside 1..{self.memory}")
        self.budgets[device] = nbytes
        return OK

    def _ranges(self, array, count):
        return [(array[i].ptr, array[i].bytes) for i in range(count)]

    def _unknown(self, ranges):
        for ptr, nbytes in ranges:
            if any(start <= ptr < end for start, end in self.foreign):
                return self._fail(UNKNOWN, f"range [{ptr:#x}, +{nbytes}) does not lie inside "
                                           "one live block of this allocator")
        return OK

    def _decode(self, options):
        tenant = options.tenant.decode() if options.tenant else None
        return {"device": options.device, "mode": MODE_NAMES.get(options.mode, options.mode),
                "policy": POLICY_NAMES.get(options.policy, options.policy),
                "stream": (options.stream or 0) if options.has_stream else None,
                "wait_complete": bool(options.wait_complete),
                "cycle_bytes": options.cycle_bytes, "cycle_plans": options.cycle_plans,
                "tenant": tenant}

    def uma_will_access(self, handle, array, count, options_ref, out_ref):
        ranges, options = self._ranges(array, count), self._decode(_obj(options_ref))
        self.log.append(("will_access", ranges, options))
        if self._unknown(ranges):
            return UNKNOWN
        placing = options["policy"] != "remote_map"
        needed = sum(n for r in ranges for n in [r[1]] if placing and r not in self.resident)
        budget = self.budgets.get(options["device"], self.memory)
        held = self.held_bytes(ranges)
        if needed + held > budget:
            return self._fail(QUOTA, f"will_access: the plan needs {needed} more bytes on "
                                     f"device {options['device']}, whose budget is {budget} "
                                     f"bytes with {held} held by plans or by this one")
        victims = sorted((self.last_use[r], r) for r in self.resident
                         if not self.holds.get(r) and r not in ranges)
        evicted = 0
        while sum(self.resident.values()) + self.tier_bytes + needed > budget:
            r = victims.pop(0)[1]
            evicted += self.resident.pop(r)
        self.clock += 1
        for r in ranges:
            self.holds[r] = self.holds.get(r, 0) + 1
            self.last_use[r] = self.clock
            if placing:
                self.resident[r] = r[1]
            else:
                self.resident.pop(r, None)
        self.peak = max(self.peak, sum(self.resident.values()) + self.tier_bytes)
        if out_ref is not None:
            out = _obj(out_ref)
            out.to_device_bytes, out.to_host_bytes = needed, evicted
            out.mapped_bytes = 0 if placing else sum(n for _, n in ranges)
        return OK

    def uma_done_with(self, handle, array, count):
        ranges = self._ranges(array, count)
        self.log.append(("done_with", ranges))
        if self._unknown(ranges):
            return UNKNOWN
        if any(not self.holds.get(r) for r in ranges):
            return self._fail(INVALID, "done_with: a range is in no plan")
        for r in ranges:
            self.holds[r] -= 1
        return OK

    def uma_dead(self, handle, array, count, out_ref):
        ranges = self._ranges(array, count)
        self.log.append(("dead", ranges))
        if self._unknown(ranges):
            return UNKNOWN
        if any(self.holds.get(r) for r in ranges):
            return self._fail(INVALID, "dead: a range is held (done_with it first)")
        discarded = sum(self.resident.pop(r, 0) for r in ranges)
        if out_ref is not None:
            _obj(out_ref).discarded_bytes = discarded
        return OK

    def uma_get_residency(self, handle, ref):
        out = _obj(ref)
        out.device_count = self.devices
        for d in range(self.devices):
            device = out.devices[d]
            device.memory_bytes, device.budget_bytes = self.memory, self.budgets.get(d, 0)
            device.resident_bytes = sum(self.resident.values()) + self.tier_bytes
            device.peak_bytes = self.peak
            device.held_bytes = self.held_bytes()
        return OK

    def uma_residency_json(self, handle, buffer, capacity, needed_ref):
        text = json.dumps({"budgets": self.budgets, "peak": self.peak}).encode() + b"\0"
        _obj(needed_ref).value = len(text)
        if buffer is None or capacity < len(text):
            return self._fail(66, "buffer too small")
        ctypes.memmove(buffer, text, len(text))
        return OK

    def uma_sequence_create(self, handle, lookahead, out_ref):
        key = len(self.sequences) + 1
        self.sequences[key] = {"lookahead": lookahead, "steps": [], "held": None}
        _obj(out_ref).value = key
        return OK

    def uma_sequence_add_step(self, key, array, count, options_ref):
        self.sequences[key]["steps"].append((self._ranges(array, count),
                                             self._decode(_obj(options_ref))))
        return OK

    def uma_sequence_begin(self, key, step, out_ref):
        sequence = self.sequences[key]
        self.log.append(("sequence_begin", step))
        ranges, options = sequence["steps"][step % len(sequence["steps"])]
        self.uma_sequence_finish(key)
        array = (binding.Range * len(ranges))(*[binding.Range(p, n) for p, n in ranges])
        plan = binding.PlanOptions(policy=binding.RESIDENCY_POLICIES[options["policy"]],
                                   device=options["device"])
        status = self.uma_will_access(None, array, len(ranges), ctypes.byref(plan), out_ref)
        if status == OK:
            sequence["held"] = array
        return status

    def uma_sequence_finish(self, key):
        held = self.sequences[key]["held"]
        self.sequences[key]["held"] = None
        return self.uma_done_with(None, held, len(held)) if held is not None else OK

    def uma_sequence_destroy(self, key):
        if key:
            self.uma_sequence_finish(key)
            self.log.append(("sequence_destroy", key))
        return OK


def install(path, log=None, **options):
    """Makes uma_c.library(path) return a FakePlans over the real library; returns the fake."""
    resolved, real = uma_c.library(path)
    fake = FakePlans(real, log, **options)
    uma_c.allocator._libraries[resolved] = fake
    return fake
