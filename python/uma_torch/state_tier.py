"""The optimizer state of offload(step_in_backward=True) that does not fit the device budget, in
uma's host tier (issue 39): pinned host memory between steps, streamed a chunk at a time through
a ring of device-memory staging slots on the copy engines (uma_copy) around the chunk's step in
the backward pass. Kernels never read it across the link, so the backward pass's kernels beside
the copies are not held back (docs/frameworks.md "Stepping in the backward pass", "On the copy
engines", says why each piece is as it is).
"""

import collections
import contextlib
import ctypes
import weakref

ALIGN = 512  # where each state tensor starts, in the host tier and in a slot (as in PyTorch's)
PAGE = 4096  # a slot is whole pages: what a budget is charged for device memory
# Slots in the ring: one chunk steps in one while the next chunk's state is copied into the
# other, beside the copy back of the chunk before (both directions of the link at once). Every
# slot's bytes come out of the room of the resident state, and each byte displaced crosses the
# link twice a step: on the H100 (offload_bench, GPT-2 24 x 1024 at 2x) two slots were as fast
# as three or faster in each of three paired runs (docs/frameworks.md).
SLOTS = 2


def aligned(nbytes, to=ALIGN):
    return -(-nbytes // to) * to


def nbytes_of(tensor):
    return tensor.numel() * tensor.element_size()


def lay_out(tensors):
    """([each tensor's offset], bytes in all) of `tensors` one after the other, each ALIGNed:
    a parameter's state in the host tier and in a slot alike."""
    offsets, cursor = [], 0
    for tensor in tensors:
        offsets.append(aligned(cursor))
        cursor = offsets[-1] + nbytes_of(tensor)
    return offsets, cursor


def estimated_span(param, copies):
    """The bytes a parameter's state will take before it exists: `copies` tensors of the
    parameter's size (AdamW's moments), each aligned, and a step count (a fused step keeps it
    on the device)."""
    return copies * aligned(nbytes_of(param)) + ALIGN


def state_copies(optimizer):
    """Tensors of a parameter's size the optimizer is estimated to keep for it: two (AdamW's
    moments), three where a group asks for amsgrad."""
    return 3 if any(group.get("amsgrad") for group in optimizer.param_groups) else 2


def slot_for(spans, copies, chunk_bytes):
    """A slot's bytes for state of `spans` outside the budget: the state of a chunk (that of a
    parameter of chunk_bytes), never more than all of the spans, in whole pages. Not the
    largest span: an embedding's state would size the ring, and the ring's room would push it
    out of the budget (at 3x, GPT-2's 412 MB of embedding moments made three slots need 1.2 GB);
    state larger than a slot takes the mapped way instead."""
    return aligned(min(sum(spans), copies * aligned(chunk_bytes) + ALIGN), PAGE)


def size_ring(backward, slots):
    """(ids of the parameters whose state stays resident, the bytes of state that may, a slot's
    bytes: 0 where the estimate puts every parameter's state in the budget): the budget less the
    parameters goes to the ring (slot_for) first, then to the state of the first layers
    (BackwardStep._reserve_state). Raises OffloadError naming the bytes when the ring does not
    fit beside the parameters."""
    params = list({id(p): p for _, _, block in backward.offload.blocks for p in block
                   if p.requires_grad and id(p) in backward.stepped_by_optimizer}.values())
    copies, staging, chunk = state_copies(backward.optimizer), 0, backward.chunk_bytes
    while True:  # more staging leaves less room, more state outside it: at most a few rounds
        reserved, room = backward._reserve_state(staging)
        spans = [estimated_span(p, copies) for p in params if id(p) not in reserved]
        if not spans:
            return reserved, room, 0
        slot = slot_for(spans, copies, chunk)
        if slots * slot <= staging:
            return reserved, room, slot
        staging, spare = slots * slot, backward.spare_bytes()
        if staging > spare:
            from .offload import OffloadError  # (offload imports this module)
            budget = backward.offload.budget
            whole = slots * slot_for([estimated_span(p, copies) for p in params], copies, chunk)
            raise OffloadError(
                f"uma_torch.offload(step_in_backward=True): the optimizer state that does not "
                f"fit streams through {slots} staging slots of {slot} bytes ({staging} bytes of "
                f"device memory, charged to the budget), but the budget of {budget} bytes "
                f"leaves {max(spare, 0)} beside the parameters and their rounding "
                f"({budget - spare} bytes); a budget of {budget - spare + whole} bytes holds "
                "them and a ring for all of the state, or lower chunk_bytes")


class _DeviceBytes:
    """`nbytes` of device memory at `ptr` as a __cuda_array_interface__ of bytes, for
    torch.as_tensor (a state tensor is a view of its slice)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "strides": None, "version": 3}


def _give_back(allocator, ptr):
    if not allocator.closed:  # (a closed allocator freed it)
        allocator.tier_free(ptr)


def host_bytes(torch, allocator, nbytes):
    """(address, a CPU uint8 tensor over it) of `nbytes` of the host tier. The memory goes back
    to uma when the last tensor over it goes, not before: a state_dict() kept past undo() keeps
    what it references."""
    ptr = allocator.host_alloc(nbytes)
    try:
        raw = (ctypes.c_char * nbytes).from_address(ptr)
        tensor = torch.frombuffer(memoryview(raw).cast("B"), dtype=torch.uint8)
    except BaseException:
        allocator.tier_free(ptr)
        raise
    weakref.finalize(raw, _give_back, allocator, ptr).atexit = False
    return ptr, tensor


class _Record:
    """One parameter's state in the host tier: the parameter, the block's address and the
    parameter's offset in it, its span, each entry (key, offset in the span, bytes, dtype,
    shape), the CPU views the optimizer's state holds between steps, and the event after the
    last copy that wrote the span (None: none in flight)."""

    __slots__ = ("param", "block", "start", "span", "entries", "views", "written")

    def __init__(self, param, block, start, span):
        self.param, self.block, self.start, self.span = param, block, start, span
        self.entries, self.views, self.written = [], {}, None


class _Slot:
    """One staging slot: its address, a uint8 tensor over it, and the event after its last copy
    back to the host tier (a fill waits for it)."""

    __slots__ = ("index", "ptr", "tensor", "free")

    def __init__(self, index, ptr, tensor):
        self.index, self.ptr, self.tensor, self.free = index, ptr, tensor, None


class _Layout:
    """Where a unit (the parameters of one chunk with host tier state, in order: a tuple of
    ids) lies in a slot: each entry's (id, key, offset, bytes, dtype, shape), and the copies
    between the host tier and a slot as [host address, offset in the slot, bytes, block], one
    for each run of parameters that lie in one block in the same order (one a chunk while the
    chunks stay what they were when the state was made)."""

    def __init__(self, unit, records):
        self.unit, self.records, self.entries, self.copies = unit, records, [], []
        self.views, cursor = {}, 0  # views: slot index -> {id: [(key, view)]}
        for pid, record in zip(unit, records):
            start = aligned(cursor)
            host, last = record.block + record.start, self.copies[-1] if self.copies else None
            if last is not None and last[3] == record.block and host - last[0] == start - last[1]:
                last[2] = start + record.span - last[1]
            else:
                self.copies.append([host, start, record.span, record.block])
            self.entries += [(pid, key, start + offset, nbytes, dtype, shape)
                             for key, offset, nbytes, dtype, shape in record.entries]
            cursor = start + record.span
        self.extent = cursor  # the slot bytes it needs
        self.nbytes = sum(c[2] for c in self.copies)

    def views_in(self, slot):
        """{id: [(key, tensor)]}: the unit's state entries as views of `slot` (made once)."""
        views = self.views.get(slot.index)
        if views is None:
            views = self.views[slot.index] = {}
            for pid, key, offset, nbytes, dtype, shape in self.entries:
                view = slot.tensor[offset:offset + nbytes].view(dtype).view(shape)
                views.setdefault(pid, []).append((key, view))
        return views


class _Fill:
    """A unit's state being copied into a slot for the chunk at `position` of a backward pass;
    `done` is the event after the copies (timed: the step stream's wait for it is measured)."""

    __slots__ = ("position", "layout", "slot", "done")

    def __init__(self, position, layout, slot, done):
        self.position, self.layout, self.slot, self.done = position, layout, slot, done


class StateTier:
    """The host tier behind one BackwardStep: the records of the state there, the ring of
    staging slots (a device_alloc each), a copy stream each way, the units of the last backward
    pass (the order in which the next one's chunks are filled ahead), and the copies' counts
    in the BackwardStep's stats. Used from the thread that steps the chunks (autograd's) and
    the one calling optimizer.step()/state_dict(), one at a time as a training loop does."""

    def __init__(self, backward, slot_bytes, slots):
        torch = self.torch = backward.torch
        self.optimizer, self.device = backward.optimizer, backward.device
        self.allocator, self.stats = backward.offload.allocator, backward.stats
        self.slot_bytes = slot_bytes
        self.records = {}  # id(param) -> _Record
        self.placed = {}  # id(param) -> (param, {key: host tier view or resident tensor})
        self.layouts = {}  # unit -> _Layout (forgotten when no pass used it)
        self.sequence, self.units = [], []  # the last pass's units; this pass's so far
        self.ahead = collections.deque()  # _Fill for the next positions of this pass, in order
        self.turn = 0  # the slot the next fill takes (round robin)
        self.retired = collections.deque()  # (event, tensors): kept until the event passed
        self.timing, self.exposed_ms = [], 0.0  # (step stream reached the chunk, its fill)
        self.h2d, self.d2h = torch.cuda.Stream(self.device), torch.cuda.Stream(self.device)
        # One device allocation a slot: a copy that ran past its slot would be refused by uma
        # (the range must lie in one block) rather than overwrite the next slot.
        self.ring, self.slots = [], []
        try:
            for k in range(slots):
                self.ring.append(self.allocator.device_alloc(slot_bytes, self.device))
                self.slots.append(_Slot(k, self.ring[-1], torch.as_tensor(
                    _DeviceBytes(self.ring[-1], slot_bytes), device=f"cuda:{self.device}")))
        except BaseException:
            self.slots = []
            while self.ring:
                self.allocator.tier_free(self.ring.pop())
            raise
        # state_dict() reads the host tier: after every copy back; load_state_dict() replaces
        # the state with device tensors: copied into the host tier at once (else at the step).
        self.hooks = []
        if hasattr(self.optimizer, "register_state_dict_pre_hook"):
            self.hooks.append(self.optimizer.register_state_dict_pre_hook(
                lambda optimizer: self.wait()))
        if hasattr(self.optimizer, "register_load_state_dict_post_hook"):
            self.hooks.append(self.optimizer.register_load_state_dict_post_hook(
                lambda optimizer: self.reload(self.optimizer.param_groups)))
        self.stats.update(staging_bytes=slots * slot_bytes, staging_slots=slots,
                          host_state_bytes=0, copied_to_device_bytes=0, copied_to_host_bytes=0,
                          streamed_chunks=0, sent_ahead_chunks=0, filled_on_demand_chunks=0,
                          reloaded_state_bytes=0)

    # --- the state made by the first step ------------------------------------------------

    def span(self, param):
        """The slot bytes `param`'s state takes (0: none in the host tier)."""
        record = self.records.get(id(param))
        return aligned(record.span) if record is not None else 0

    def takes(self, param, tensors):
        """Whether `param`'s new state (`tensors`) goes into the host tier: contiguous (a copy
        of its bytes is the tensor), within one slot, and the parameter has none there yet."""
        return id(param) not in self.records and all(t.is_contiguous() for t in tensors) and \
            lay_out(tensors)[1] <= self.slot_bytes

    def adopt(self, fresh, stream):
        """The state a chunk's first step made on `stream` (`fresh`: [(param, [(key,
        tensor)])]) moved into one block of the host tier, laid out as a slot will hold it, by
        copies on the copy-back stream after the step; the optimizer's state then holds CPU
        tensors over the block, and the device tensors are let go once the copies are done."""
        torch, places, cursor = self.torch, [], 0
        for param, entries in fresh:
            start = aligned(cursor)
            offsets, span = lay_out([t for _, t in entries])
            places.append((param, entries, start, offsets, span))
            cursor = start + span
        block, base = host_bytes(torch, self.allocator, cursor)
        made = torch.cuda.Event()
        made.record(stream)
        self.d2h.wait_event(made)
        for _, entries, start, offsets, _ in places:
            for (_, tensor), offset in zip(entries, offsets):
                self.allocator.copy(block + start + offset, tensor.data_ptr(),
                                    nbytes_of(tensor), self.d2h)
        written = torch.cuda.Event()
        written.record(self.d2h)
        for param, entries, start, offsets, span in places:
            record, state = _Record(param, block, start, span), self.optimizer.state[param]
            record.written = written
            for (key, tensor), offset in zip(entries, offsets):
                nbytes = nbytes_of(tensor)
                record.entries.append((key, offset, nbytes, tensor.dtype, tuple(tensor.shape)))
                at = start + offset
                record.views[key] = state[key] = \
                    base[at:at + nbytes].view(tensor.dtype).view(tuple(tensor.shape))
            self.records[id(param)] = record
            self.placed[id(param)] = (param, record.views)
        moved = sum(nbytes_of(t) for _, entries, _, _, _ in places for _, t in entries)
        self.retired.append((written, [t for _, entries, _, _, _ in places for _, t in entries]))
        self.stats["host_state_bytes"] += moved
        self.stats["copied_to_host_bytes"] += moved

    # --- a chunk's step ------------------------------------------------------------------

    @contextlib.contextmanager
    def streamed(self, chunk, stream):
        """While `chunk` steps on `stream`: the host tier state of its parameters in a staging
        slot (filled ahead, or now), the step stream waiting for that fill, the optimizer's
        state entries pointing at the slot. After the step the entries point at the host tier
        again and the slot is copied back on the copy-back stream, after the step's event."""
        self.reload([{"params": chunk}])  # state a load_state_dict() without hooks replaced
        params = [p for p in chunk if id(p) in self.records]
        if not params:
            yield
            return
        torch, unit = self.torch, tuple(id(p) for p in params)
        fill = self._take(unit)
        reached = torch.cuda.Event(enable_timing=True)
        reached.record(stream)
        stream.wait_event(fill.done)
        self.timing.append((reached, fill.done))
        pointed = []
        for param in params:
            state = self.optimizer.state[param]
            for key, view in fill.layout.views_in(fill.slot)[id(param)]:
                state[key] = view
                pointed.append((param, state, key, view))
        stepped = torch.cuda.Event()
        try:
            yield
            kept = self._point_back(pointed, stream)
        except BaseException:
            self._point_back(pointed, None)
            stepped.record(stream)
            fill.slot.free = stepped  # no copy back: the host tier keeps the state before
            raise
        stepped.record(stream)
        self.d2h.wait_event(stepped)
        for host, offset, nbytes, _ in fill.layout.copies:
            self.allocator.copy(host, fill.slot.ptr + offset, nbytes, self.d2h)
        back = torch.cuda.Event()
        back.record(self.d2h)
        fill.slot.free = back
        for record in fill.layout.records:
            record.written = back
        if kept:
            self.retired.append((back, kept))
        self.stats["streamed_chunks"] += 1
        self.stats["copied_to_host_bytes"] += fill.layout.nbytes

    def _point_back(self, pointed, stream):
        """The state entries pointed at the host tier again. An entry the step replaced instead
        of updating in place is copied into its slot view on `stream` first (None: not), so
        that the copy back takes it; returns the replacements, to keep until that is done. A
        replacement that is no device tensor of the entry's dtype and size raises
        StepInBackwardError once every entry points at the host tier."""
        kept, refused = [], None
        for param, state, key, view in pointed:
            now = state.get(key)
            if now is not view and stream is not None:
                if self.torch.is_tensor(now) and now.is_cuda and now.dtype == view.dtype and \
                        nbytes_of(now) == nbytes_of(view):
                    now = now if now.is_contiguous() else now.contiguous()
                    self.allocator.copy(view.data_ptr(), now.data_ptr(), nbytes_of(view),
                                        stream)
                    kept.append(now)
                elif refused is None:
                    refused = (key, type(now).__name__)
            state[key] = self.records[id(param)].views[key]
        if refused is not None:
            from .backward_step import StepInBackwardError  # (it imports this module)
            raise StepInBackwardError(
                f"uma_torch.offload(step_in_backward=True): the optimizer replaced its state "
                f"{refused[0]!r} with a {refused[1]} that is no device tensor of its dtype and "
                "size; state in the host tier must be updated in place")
        return kept

    def chunk_done(self, chunk):
        """After a chunk's step (and its new state's placement): its unit is the next of this
        pass's order, and fills go ahead for the chunks that followed it in the last pass."""
        unit = tuple(id(p) for p in chunk if id(p) in self.records)
        if unit:
            self.units.append(unit)
        self._send_ahead()

    def _take(self, unit):
        """The fill of this pass's next unit: the one sent ahead where it is that unit (the
        order of the last pass held), else one made now (the fills ahead are dropped: they are
        for another order; their slots are filled again in turn)."""
        fill = self.ahead.popleft() if self.ahead else None
        if fill is not None and (fill.position != len(self.units) or fill.layout.unit != unit):
            self.ahead.clear()
            fill = None
        if fill is None:
            fill = self._fill(len(self.units), self._layout(unit))
            self.stats["filled_on_demand_chunks"] += 1
        return fill

    def _send_ahead(self):
        """Fills for the units that followed in the last pass, while a slot is free of this
        pass's (one slot for the chunk stepping, the rest ahead)."""
        position = len(self.units) + len(self.ahead)
        while len(self.ahead) < len(self.slots) - 1 and position < len(self.sequence):
            unit = self.sequence[position]
            if not all(pid in self.records for pid in unit):
                break
            layout = self._layout(unit)
            if layout.extent > self.slot_bytes:
                break  # a chunk of the first step, larger than a slot: chunks close earlier now
            self.ahead.append(self._fill(position, layout))
            self.stats["sent_ahead_chunks"] += 1
            position += 1

    def _fill(self, position, layout):
        """The unit of `layout` copied into the next slot on the fill stream, after that slot's
        last copy back and after the last copy back of each state it reads."""
        if layout.extent > self.slot_bytes:  # (the chunks close before: never)
            raise RuntimeError(f"uma_torch: a chunk's state of {layout.extent} bytes does not "
                               f"fit a staging slot of {self.slot_bytes}")
        slot = self.slots[self.turn]
        self.turn = (self.turn + 1) % len(self.slots)
        waits = {id(r.written): r.written for r in layout.records if r.written is not None}
        if slot.free is not None:
            waits[id(slot.free)] = slot.free
        for event in waits.values():
            self.h2d.wait_event(event)
        for host, offset, nbytes, _ in layout.copies:
            self.allocator.copy(slot.ptr + offset, host, nbytes, self.h2d)
        done = self.torch.cuda.Event(enable_timing=True)
        done.record(self.h2d)
        self.stats["copied_to_device_bytes"] += layout.nbytes
        return _Fill(position, layout, slot, done)

    def _layout(self, unit):
        layout = self.layouts.get(unit)
        if layout is None:
            layout = self.layouts[unit] = _Layout(unit, [self.records[pid] for pid in unit])
        return layout

    def pass_ended(self):
        """The backward pass ended: its units are the order the next pass is filled in, whose
        first fills go ahead now (behind the forward pass); the timings that are done are added
        up, the state tensors whose copies are done let go."""
        self.sequence, self.units = self.units, []
        self.ahead.clear()
        used = set(self.sequence)
        self.layouts = {u: layout for u, layout in self.layouts.items() if u in used}
        self._fold(block=False)
        self.let_go(wait=False)
        self._send_ahead()

    # --- between steps -------------------------------------------------------------------

    def holds(self, param):
        return id(param) in self.records

    def keep(self, param, entries):
        """Resident state placed for `param` ([(key, tensor)]): reload() puts a replacement's
        values back into it, as into the host tier, so that its plan stays the one in force."""
        self.placed[id(param)] = (param, dict(entries))

    def reload(self, groups):
        """State of the parameters of `groups` that was replaced in the optimizer's state
        (load_state_dict() moves it to the device) copied into the memory placed for it, the
        host tier or the resident tensors, which take its place again; a parameter whose state
        is gone is forgotten (its next step makes it anew). Waits for every copy first; the
        fills sent ahead are dropped. Returns whether anything was replaced."""
        changed = []
        for group in groups:
            for param in group["params"]:
                placed = self.placed.get(id(param))
                if placed is None:
                    continue
                state = self.optimizer.state.get(param) or {}
                now = {key: state.get(key) for key in placed[1]}
                if any(now[key] is not tensor for key, tensor in placed[1].items()):
                    changed.append((param, placed[1], now))
        if not changed:
            return False
        self.wait()  # no copy reads or writes the host tier meanwhile
        compute, kept, restore = self.torch.cuda.current_stream(self.device), [], []
        for param, tensors, now in changed:
            if all(tensor is None for tensor in now.values()):
                self.placed.pop(id(param))
                self.records.pop(id(param), None)
                continue
            for key, home in tensors.items():
                tensor = now[key]
                if tensor is home:
                    continue
                if not (self.torch.is_tensor(tensor) and tensor.dtype == home.dtype and
                        tuple(tensor.shape) == tuple(home.shape)):
                    from .backward_step import StepInBackwardError  # (it imports this module)
                    raise StepInBackwardError(
                        f"uma_torch.offload(step_in_backward=True): optimizer state {key!r} "
                        f"was replaced by {type(tensor).__name__} {getattr(tensor, 'shape', '')}"
                        f", not a tensor of dtype {home.dtype} and shape {tuple(home.shape)} "
                        "as the one placed for it")
                if tensor.is_cuda:
                    kept.append(tensor if tensor.is_contiguous() else tensor.contiguous())
                    self.allocator.copy(home.data_ptr(), kept[-1].data_ptr(), nbytes_of(home),
                                        compute)
                else:
                    home.copy_(tensor)
                restore.append((self.optimizer.state[param], key, home))
                self.stats["reloaded_state_bytes"] += nbytes_of(home)
        compute.synchronize()
        for state, key, home in restore:
            state[key] = home
        self.forget()
        return True

    def forget(self):
        """Drops the fills sent ahead and the slots' layouts (the next chunks fill anew)."""
        self.ahead.clear()
        self.layouts = {}

    def wait(self):
        """Waits for every copy between the host tier and the slots (the host may then read
        and write the host tier)."""
        self.h2d.synchronize()
        self.d2h.synchronize()
        self.let_go(wait=False)

    def let_go(self, wait):
        """Drops the tensors kept for copies that are done (all of them with wait)."""
        while self.retired and (wait or self.retired[0][0].query()):
            event, _ = self.retired.popleft()
            if wait:
                event.synchronize()

    def _fold(self, block):
        kept = []
        for reached, filled in self.timing:
            if block:
                reached.synchronize()
                filled.synchronize()
            elif not (reached.query() and filled.query()):
                kept.append((reached, filled))
                continue
            self.exposed_ms += max(0.0, reached.elapsed_time(filled))
        self.timing = kept

    def exposed_transfer_ms(self):
        """How long the step streams waited for the fills, in ms, over every chunk streamed so
        far: for each, from when its step stream reached it to when its fill was done (0 where
        the fill was done first). Waits for the chunks' events."""
        self._fold(block=True)
        return self.exposed_ms

    # --- undo ----------------------------------------------------------------------------

    def close(self):
        """undo(): every copy done, the state in the host tier copied back into device tensors
        of its own (the optimizer steps as it did before offload), the hooks removed, the ring
        given back. The host tier goes back to uma as its last tensors go."""
        if not self.ring:
            return
        self.wait()
        for hook in self.hooks:
            hook.remove()
        self.hooks = []
        torch, compute, moved = self.torch, self.torch.cuda.current_stream(self.device), []
        for record in self.records.values():
            state = self.optimizer.state.get(record.param) or {}
            for key, view in record.views.items():
                if state.get(key) is not view:
                    continue  # replaced since: the replacement stays
                copy = torch.empty(tuple(view.shape), dtype=view.dtype,
                                   device=f"cuda:{self.device}")
                self.allocator.copy(copy.data_ptr(), view.data_ptr(), nbytes_of(view), compute)
                moved.append((state, key, copy))
        compute.synchronize()
        for state, key, copy in moved:
            state[key] = copy
        self.records, self.placed, self.layouts = {}, {}, {}
        self.sequence, self.units = [], []
        self.ahead.clear()
        self.retired.clear()
        self.slots = []
        while self.ring:
            self.allocator.tier_free(self.ring.pop())
