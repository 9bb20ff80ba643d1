"""A stand-in for the C ABI's tiers and copies (issue 39: uma_host_alloc, uma_device_alloc,
uma_tier_free, uma_copy, and their counters in uma_get_stats and uma_get_residency) in Python,
over another library object (FakePlans over the real libuma_c.so, or the real library), until
the library has them. It receives exactly the ctypes arguments uma_c's binding passes, logs
each call to `log`, copies bytes for real (ctypes.memmove: the host backend's behaviour) and
refuses what the C ABI refuses: an address in no tier block, a range past a block's end, device
memory over the budget (charged through FakePlans.tier_bytes, in whole pages).

Memory outside every tier block (uma_malloc blocks: the fake torch's CUDA tensors) counts as
device memory in the copy counters, as managed memory on the emulated device.

    fake = uma_fake_tiers.install(path, log)   # uma_c.library(path) returns it, plans faked too
"""

import ctypes

import uma_c
import uma_fake_plans
from uma_c import binding

OK, QUOTA, INVALID, UNKNOWN, NULL = 0, 2, 3, 64, 65
PAGE = 4096


def _obj(ref):
    obj = getattr(ref, "_obj", None)
    return obj if obj is not None else ref.contents


class FakeTiers:
    def __init__(self, inner, log=None):
        self._inner = inner
        self.log = log if log is not None else []
        self.blocks = {}  # address -> [kind ("host"/"device"), bytes, device, buffer]
        self.counters = dict.fromkeys(binding.TIER_STATS_FIELDS, 0)
        self.error = None
        self.fail = {}  # C function name -> (status, message): the next call of it fails

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def _fail(self, status, message):
        self.error = message.encode()
        return status

    def uma_last_error(self):
        error, self.error = self.error, None
        return error if error is not None else self._inner.uma_last_error()

    def _refused(self, name):
        if name in self.fail:
            return self._fail(*self.fail.pop(name))
        return OK

    def _alloc(self, kind, size, device, out_ref):
        buffer = ctypes.create_string_buffer(size)
        ptr = ctypes.addressof(buffer)
        self.blocks[ptr] = [kind, size, device, buffer]
        self.counters[f"{kind}_tier_bytes"] += size
        _obj(out_ref).value = ptr
        return OK

    def uma_host_alloc(self, handle, size, out_ref):
        self.log.append(("host_alloc", size))
        if self._refused("uma_host_alloc"):
            return QUOTA
        if not size:
            _obj(out_ref).value = None
            return OK
        return self._alloc("host", size, binding.DEVICE_HOST, out_ref)

    def uma_device_alloc(self, handle, size, device, out_ref):
        self.log.append(("device_alloc", size, device))
        if self._refused("uma_device_alloc"):
            return QUOTA
        if not size:
            _obj(out_ref).value = None
            return OK
        charged = -(-size // PAGE) * PAGE
        budgets = getattr(self._inner, "budgets", None)
        if budgets is not None and device in budgets:
            held = self._inner.held_bytes()
            if held + charged > budgets[device]:
                return self._fail(QUOTA, f"uma_device_alloc: {charged} bytes do not fit device "
                                         f"{device}'s budget of {budgets[device]} bytes beside "
                                         f"{held} held")
        if budgets is not None:
            self._inner.tier_bytes += charged
        return self._alloc("device", size, device, out_ref)

    def uma_tier_free(self, handle, ptr):
        self.log.append(("tier_free", ptr))
        block = self.blocks.pop(ptr, None)
        if block is None:
            return self._fail(UNKNOWN, f"uma_tier_free: {ptr:#x} is no tier block of this "
                                       "allocator")
        kind, size = block[0], block[1]
        self.counters[f"{kind}_tier_bytes"] -= size
        if kind == "device" and hasattr(self._inner, "tier_bytes"):
            self._inner.tier_bytes -= -(-size // PAGE) * PAGE
        return OK

    def _side(self, ptr, nbytes):
        """"host" or "device" for a range inside one tier block, "device" for one outside all
        (uma_malloc memory), None for one that starts in a block and runs past its end, "foreign"
        for one in a range the plans' stand-in refuses (FakePlans.foreign)."""
        if any(start <= ptr < end for start, end in getattr(self._inner, "foreign", ())):
            return "foreign"
        for start, (kind, size, _, _) in self.blocks.items():
            if start <= ptr < start + size:
                return kind if ptr + nbytes <= start + size else None
        return "device"

    def uma_copy(self, handle, dst, src, nbytes, stream):
        self.log.append(("uma_copy", dst, src, nbytes, stream or 0))
        if self._refused("uma_copy"):
            return UNKNOWN
        if not nbytes:
            return OK
        if not dst or not src:
            return self._fail(NULL, "uma_copy: a null address")
        to, source = self._side(dst, nbytes), self._side(src, nbytes)
        if "foreign" in (to, source):
            return self._fail(UNKNOWN, f"uma_copy: [{src:#x}, +{nbytes}) -> {dst:#x}: a range "
                                       "lies inside no live block of this allocator")
        if to is None or source is None:
            return self._fail(INVALID, f"uma_copy: {nbytes} bytes run past a tier block's end")
        ctypes.memmove(dst, src, nbytes)
        direction = "to_device" if (source, to) == ("host", "device") else \
            "to_host" if (source, to) == ("device", "host") else "other"
        self.counters[f"copy_{direction}_bytes"] += nbytes
        self.counters["copies"] += 1
        return OK

    def uma_get_stats(self, handle, ref):
        status = self._inner.uma_get_stats(handle, ref)
        if status == OK:
            out = _obj(ref)
            for name, value in self.counters.items():
                setattr(out, name, value)
        return status

    def uma_get_residency(self, handle, ref):
        status = self._inner.uma_get_residency(handle, ref)
        if status == OK:
            out = _obj(ref)
            out.copy_to_device_bytes = self.counters["copy_to_device_bytes"]
            out.copy_to_host_bytes = self.counters["copy_to_host_bytes"]
        return status


def install(path, log=None, plans=True, **options):
    """Makes uma_c.library(path) return a FakeTiers over a FakePlans (`plans`; `options` are
    FakePlans') or over the real library; returns the FakeTiers (its plans: `_inner`)."""
    resolved, real = uma_c.library(path)
    inner = uma_fake_plans.FakePlans(real, log, **options) if plans else real
    fake = FakeTiers(inner, log)
    uma_c.allocator._libraries[resolved] = fake
    return fake
