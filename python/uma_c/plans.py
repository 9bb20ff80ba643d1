"""Residency plans through the C ABI (issue 25): device budgets, will_access / done_with / dead
by byte range, the sequence form and the residency report. Allocator inherits PlanCalls.

A range is a pair (address, bytes) inside memory this allocator handed out (a uma_malloc block
or part of one); uma rounds it outward to whole 4 KiB pages and charges exactly those pages.
"""

import ctypes

from . import binding
from .errors import check_status as _check, optional_function

_TOO_SMALL = binding.STATUS["UMA_ERR_BUFFER_TOO_SMALL"]


def plan_function(lib, name):
    """The C function `name` of PLAN_PROTOTYPES (errors.optional_function)."""
    return optional_function(lib, name, "the residency plan calls (issue 25)")


def _enum(field, value, table):
    if isinstance(value, str) and value in table:
        return table[value]
    if isinstance(value, int) and not isinstance(value, bool) and value in table.values():
        return value
    raise ValueError(f"uma: {field}={value!r} is not one of {', '.join(table)}")


def _count(field, value, limit):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"uma: {field} must be an int, not {type(value).__name__}")
    if not 0 <= value <= limit:
        raise ValueError(f"uma: {field}={value} is out of range 0..{limit}")
    return value


def make_ranges(ranges):
    """(ctypes array of uma_range, count) from an iterable of (address, bytes) pairs. Raises
    TypeError/ValueError naming the bad entry before the library is called: an address must be
    a positive int, bytes a positive int, and the list must not be empty."""
    pairs = list(ranges)
    if not pairs:
        raise ValueError("uma: a plan needs at least one (address, bytes) range")
    array = (binding.Range * len(pairs))()
    for index, pair in enumerate(pairs):
        try:
            ptr, nbytes = pair
        except (TypeError, ValueError):
            raise TypeError(f"uma: range {index} is {pair!r}, not an (address, bytes) pair") \
                from None
        for what, value in (("address", ptr), ("bytes", nbytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"uma: range {index} has {what} {value!r}; it must be a "
                                 "positive int")
        array[index].ptr, array[index].bytes = ptr, nbytes
    return array, len(pairs)


def make_plan_options(lib, device=0, mode="read", policy="auto", stream=None,
                      wait_complete=False, cycle_bytes=0, cycle_plans=0, tenant=None):
    """A uma_plan_options: uma_plan_options_init's defaults, then the arguments. `stream`: None
    moves on the allocator's lanes; an int address (0: the legacy default stream) or an object
    with `cuda_stream`/`ptr` orders the moves on that stream."""
    options = binding.PlanOptions()
    plan_function(lib, "uma_plan_options_init")(ctypes.byref(options))
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        raise ValueError(f"uma: a plan's device must be a device index >= 0, not {device!r}")
    options.device = device
    options.mode = _enum("mode", mode, binding.ACCESS_MODES)
    options.policy = _enum("policy", policy, binding.RESIDENCY_POLICIES)
    if stream is not None:
        address = getattr(stream, "cuda_stream", getattr(stream, "ptr", stream))
        options.has_stream, options.stream = 1, _count("stream", address, 2**64 - 1) or None
    if not isinstance(wait_complete, bool):
        raise TypeError(f"uma: wait_complete must be True or False, not {wait_complete!r}")
    options.wait_complete = int(wait_complete)
    options.cycle_bytes = _count("cycle_bytes", cycle_bytes, 2**64 - 1)
    options.cycle_plans = _count("cycle_plans", cycle_plans, 2**32 - 1)
    if tenant is not None:
        if not isinstance(tenant, str) or not tenant:
            raise ValueError(f"uma: tenant must be a non-empty str, not {tenant!r}")
        options.tenant = tenant.encode()
    return options


def _result_dict(out):
    return {name: getattr(out, name) for name in binding.PLAN_RESULT_FIELDS}


def _new_result():
    out = binding.PlanResult()
    out.struct_size = ctypes.sizeof(binding.PlanResult)
    return out


class PlanCalls:
    """The plan methods of uma_c.Allocator (it provides _lib and _live())."""

    def has_plans(self):
        """Whether this library has the plan calls (a library older than issue 25 has not)."""
        return binding.has_plans(self._lib)

    def set_device_budget(self, device, budget_bytes):
        """uma keeps at most `budget_bytes` placed by plans on `device` (1 byte up to its
        memory). UMA_ERR_NO_DEVICE on a backend without devices."""
        if isinstance(device, bool) or not isinstance(device, int) or device < 0:
            raise ValueError(f"uma: device must be a device index >= 0, not {device!r}")
        budget = _count("budget_bytes", budget_bytes, 2**64 - 1)
        status = plan_function(self._lib, "uma_set_device_budget")(self._live(), device, budget)
        _check(self._lib, "uma_set_device_budget", status)

    def will_access(self, ranges, device=0, mode="read", policy="auto", stream=None,
                    wait_complete=False, cycle_bytes=0, cycle_plans=0, tenant=None):
        """Plans the ranges for use on `device` and holds them until done_with. Returns the
        moves queued (uma_plan_result as a dict). Over the budget: UmaMemoryError
        (UMA_ERR_QUOTA_EXCEEDED); a range uma did not hand out: UMA_ERR_UNKNOWN_POINTER. In
        both cases nothing changed."""
        array, count = make_ranges(ranges)
        options = make_plan_options(self._lib, device, mode, policy, stream, wait_complete,
                                    cycle_bytes, cycle_plans, tenant)
        out = _new_result()
        status = plan_function(self._lib, "uma_will_access")(
            self._live(), array, count, ctypes.byref(options), ctypes.byref(out))
        _check(self._lib, "uma_will_access", status)
        return _result_dict(out)

    def done_with(self, ranges):
        """Ends one hold of each range: evictable again."""
        array, count = make_ranges(ranges)
        status = plan_function(self._lib, "uma_done_with")(self._live(), array, count)
        _check(self._lib, "uma_done_with", status)

    def dead(self, ranges):
        """The ranges' contents are not needed: dropped wherever they are, nothing moves back.
        Returns the moves (a dict)."""
        array, count = make_ranges(ranges)
        out = _new_result()
        status = plan_function(self._lib, "uma_dead")(self._live(), array, count,
                                                      ctypes.byref(out))
        _check(self._lib, "uma_dead", status)
        return _result_dict(out)

    def sequence(self, lookahead=1):
        """A Sequence (uma_sequence) of this allocator sending each plan `lookahead` steps
        ahead."""
        return Sequence(self, lookahead)

    def residency(self):
        """The residency report (uma_get_residency) as a dict: the ledger's fields and
        "devices", a list of dicts (memory, budget, resident, peak, held bytes) per device."""
        out = binding.ResidencyReport()
        out.struct_size = ctypes.sizeof(binding.ResidencyReport)
        status = plan_function(self._lib, "uma_get_residency")(self._live(), ctypes.byref(out))
        _check(self._lib, "uma_get_residency", status)
        report = {name: getattr(out, name) for name in binding.RESIDENCY_FIELDS}
        report["driver_counters_on"] = bool(out.driver_counters_on)
        shown = min(out.device_count, binding.MAX_REPORTED_DEVICES)
        report["device_count"] = out.device_count
        report["devices"] = [{name: getattr(out.devices[i], name)
                              for name in binding.DEVICE_RESIDENCY_FIELDS} for i in range(shown)]
        return report

    def residency_json(self):
        """The residency report as JSON text (uma_residency_json)."""
        function = plan_function(self._lib, "uma_residency_json")
        needed = ctypes.c_size_t(0)
        buffer = ctypes.create_string_buffer(1)
        status = function(self._live(), None, 0, ctypes.byref(needed))
        while status == _TOO_SMALL:
            buffer = ctypes.create_string_buffer(needed.value)
            status = function(self._live(), buffer, len(buffer), ctypes.byref(needed))
        _check(self._lib, "uma_residency_json", status)
        return buffer.value.decode()


class Sequence:
    """uma_sequence: steps named once (add_step), then begin(i) makes step i's plan the one in
    force and sends the next `lookahead` steps' plans ahead. Not thread-safe. close() (or the
    with block) destroys it, finishing every plan it holds."""

    def __init__(self, allocator, lookahead=1):
        self._allocator = allocator
        self._lib = allocator._lib
        lookahead = _count("lookahead", lookahead, 2**63 - 1)
        handle = ctypes.c_void_p()
        status = plan_function(self._lib, "uma_sequence_create")(
            allocator._live(), lookahead, ctypes.byref(handle))
        _check(self._lib, "uma_sequence_create", status)
        self._handle = handle.value
        self.steps = 0

    def _live(self):
        if self._handle is None:
            raise ValueError("uma: this Sequence was closed")
        return self._handle

    def add_step(self, ranges, **options):
        """Adds a step (its ranges and will_access's keyword options); before the first
        begin only. Returns the step's index."""
        array, count = make_ranges(ranges)
        plan = make_plan_options(self._lib, **options)
        status = plan_function(self._lib, "uma_sequence_add_step")(
            self._live(), array, count, ctypes.byref(plan))
        _check(self._lib, "uma_sequence_add_step", status)
        self.steps += 1
        return self.steps - 1

    def begin(self, step):
        """Step `step` (any int; the steps repeat as a cycle) is in force; returns its plan's
        moves (a dict)."""
        out = _new_result()
        status = plan_function(self._lib, "uma_sequence_begin")(
            self._live(), _count("step", step, 2**63 - 1), ctypes.byref(out))
        _check(self._lib, "uma_sequence_begin", status)
        return _result_dict(out)

    def finish(self):
        """Ends every plan the sequence holds."""
        status = plan_function(self._lib, "uma_sequence_finish")(self._live())
        _check(self._lib, "uma_sequence_finish", status)

    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Destroys the sequence (finishing its plans first); a second close does nothing."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        status = plan_function(self._lib, "uma_sequence_destroy")(handle)
        _check(self._lib, "uma_sequence_destroy", status)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
