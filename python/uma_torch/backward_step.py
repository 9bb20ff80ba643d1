"""offload(step_in_backward=True): the optimizer steps during the backward pass (issue 25).

Each parameter's gradient, once accumulated, joins the current chunk; a chunk of chunk_bytes of
parameters is stepped at once on one of two step streams, overlapping the backward pass of the
earlier layers, and its gradients are then let go (p.grad = None, as PyTorch's own optimizer in
backward does). So gradients are transient, like activations: each lives from its backward to
its chunk's step, and the budget holds the parameters and the optimizer state. The room the
parameters leave goes to the optimizer state of the parameters stepped last in the backward
pass (the first layers: no backward work is left to hide their link traffic behind). Where the
library has uma's tiers (issue 39), the rest of the state lives in the host tier and is copied
through device staging slots around each chunk's step by the copy engines (state_tier.py);
with an older library it stays on the host, mapped, and is read and written across the link by
the step (a fused one) or staged through device buffers (a multi-kernel one), while the
backward pass runs. docs/frameworks.md "Stepping in the backward pass" says what a
training loop gives up for it (gradient accumulation, reading or clipping gradients between
backward() and step()) and how those are refused.
"""

import collections
import contextlib
import functools
import threading

from . import state_tier

PAGE = 4096
OWN_PAGES_PAD = 2 << 20  # a GPU large page: mapped state shares none with other blocks
# Elements a fused step's launch may cover when it updates mapped state: 8 thread blocks of
# multi_tensor_apply's 64 Ki elements. Smaller launches hold the backward pass's kernels back
# less, but move less across the link per millisecond and cost the autograd thread a launch
# each (docs/frameworks.md "Stepping in the backward pass" has the H200's figures).
SLICE_ELEMENTS = 1 << 19
FUSED_STEPS = ("_fused_adamw_", "_fused_adam_")
STEP_STREAMS = 2  # the most step streams the chunks alternate between (the default)


def check_slice_limit(limit):
    """Raises ValueError unless `limit` is an int of at least 1 (elements a launch covers)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"uma_torch: a sliced step's launch must cover at least 1 element, "
                         f"not {limit!r}")


def sliced(fused, limit, cache=None):
    """`fused` (torch._fused_adamw_'s signature: params, grads, exp_avgs, exp_avg_sqs,
    max_exp_avg_sqs, state_steps, **hyperparameters) issued in launches of at most `limit`
    elements: each tensor cut into flat slices, each slice stepped once with its parameter's
    step count. The update is elementwise, so the result is the same; what changes is that no
    launch holds the GPU's thread blocks for as long as a whole chunk's moments take to cross
    the link (on the H200, a kernel across the link delays the kernels of other streams for its
    whole duration: 6-7x the backward pass's own kernels' time in bench/python/
    link_interference.py; in 1 Mi-element launches 1.4-1.8x, at the same link rate).
    `cache` (a PlanCache, or None): each call's launches (_Plan: which slices of the
    parameters and their state go together) kept from call to call, keyed by the parameters,
    used again while the same tensors come at the same addresses, sizes and contiguity; only the
    gradients, new at every step, are cut at every call. The step runs on the autograd thread, whose time the backward
    pass's kernels wait for."""
    check_slice_limit(limit)
    return functools.partial(_sliced_call, fused, limit, cache)


def _sliced_call(fused, limit, cache, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
                 state_steps, **kwargs):
    """One call of `fused` issued as sliced() describes (`limit` checked by the caller)."""
    states = [exp_avgs, exp_avg_sqs] + ([max_exp_avg_sqs] if max_exp_avg_sqs else [])
    plan = _Plan.of(params, states, limit, cache)
    # A parameter with a strided tensor (a channels_last moment, or a gradient) goes whole, in
    # a call of its own: flat slices of it would not be its elements; the others are sliced.
    whole = plan.whole + [i for i in plan.cut if not grads[i].is_contiguous()]
    if len(whole) > len(plan.whole):  # a strided gradient (not seen in practice): no plan
        plan = _Plan(params, states, limit, whole)
    if whole:
        fused([params[i] for i in whole], [grads[i] for i in whole],
              *([group[i] for i in whole] for group in states[:2]),
              [max_exp_avg_sqs[i] for i in whole] if max_exp_avg_sqs else [],
              [state_steps[i] for i in whole], **kwargs)
    grad_cuts = {i: grads[i].view(-1).split(limit) for i in plan.cut}
    for keys, pairs, parts in plan.launches:
        fused(parts[0], [grad_cuts[i][k] for i, k in pairs], parts[1], parts[2],
              parts[3] if max_exp_avg_sqs else [], [state_steps[i] for i in keys], **kwargs)


def in_launches(items, limit):
    """Launches of at most `limit` elements: `items` are (key, [the slices of each list]), a
    list's slices as many and as large as every other list's (a parameter's, its gradient's,
    its moments'; a copy's destination and source), each at most `limit`. Yields ([the key of
    each slice], [[the slices of list k]]) in order, each slice in one launch, consecutive
    slices together while their elements add up to at most `limit`."""
    keys, parts, size = [], [], 0
    for key, cuts in items:
        for k, count in enumerate(cut.numel() for cut in cuts[0]):
            if keys and size + count > limit:
                yield keys, parts
                keys, parts, size = [], [], 0
            parts = parts or [[] for _ in cuts]
            for part, tensor_cuts in zip(parts, cuts):
                part.append(tensor_cuts[k])
            keys.append(key)
            size += count
    if keys:
        yield keys, parts


class _Plan:
    """The launches of one sliced call: the parameters' and their state's slices, grouped as
    in_launches() groups them, with (parameter, slice) pairs to put each call's gradient slices
    in their places. Built from the parameter and state tensors alone: a call's gradients are
    cut by the caller."""

    def __init__(self, params, states, limit, whole=None):
        self.tensors = [list(params)] + [list(g) for g in states]
        self.where = self._where(self.tensors)
        if whole is None:
            whole = [i for i in range(len(params))
                     if not all(g[i].is_contiguous() for g in self.tensors)]
        self.whole, skip = whole, set(whole)
        self.cut = [i for i in range(len(params)) if i not in skip]
        items = ((i, [t[i].view(-1).split(limit) for t in self.tensors]) for i in self.cut)
        self.launches, taken = [], {}  # (keys, (parameter, its slice number) pairs, parts)
        for keys, parts in in_launches(items, limit):
            pairs = []
            for i in keys:  # in_launches yields each parameter's slices in order
                pairs.append((i, taken.get(i, 0)))
                taken[i] = pairs[-1][1] + 1
            self.launches.append((keys, pairs, parts + [[]] * (4 - len(parts))))

    @staticmethod
    def _where(tensors):
        """Each tensor's address, size and contiguity: what its flat slices depend on (a
        contiguous tensor's flat view is its memory in order, whatever its shape)."""
        return [(t.data_ptr(), t.numel(), t.is_contiguous()) for group in tensors for t in group]

    @classmethod
    def of(cls, params, states, limit, cache):
        """The call's plan: from `cache` (a PlanCache) where the same parameter and state
        tensors come again at the same addresses, sizes and contiguity (`param.data = ...`
        keeps the object and moves its memory), else a new one, kept."""
        if cache is None:
            return cls(params, states, limit)
        key = (limit, tuple(map(id, params)))
        plan = cache.get(key)
        tensors = [params] + states
        if plan is None or len(plan.tensors) != len(tensors) or not all(
                a is b for kept, now in zip(plan.tensors, tensors)
                for a, b in zip(kept, now)) or plan.where != cls._where(tensors):
            plan = cls(params, states, limit)  # (a kept plan holds its tensors: the ids in its
            cache.put(key, plan)               # key are not reused while it is kept)
        return plan


class PlanCache:
    """The kept plans of sliced calls (_Plan), by key. Bounded by use, not by a count: sweep()
    (at the end of each backward pass) forgets the plans no call used since the sweep before,
    so a model of any size keeps one plan per chunk, and a plan whose chunk changed does not
    hold its tensors for longer than a step."""

    def __init__(self):
        self.plans, self.used = {}, set()

    def get(self, key):
        plan = self.plans.get(key)
        if plan is not None:
            self.used.add(key)
        return plan

    def put(self, key, plan):
        self.plans[key] = plan
        self.used.add(key)

    def sweep(self):
        for key in [k for k in self.plans if k not in self.used]:
            del self.plans[key]
        self.used = set()

    def clear(self):
        self.plans.clear()
        self.used = set()

    def __len__(self):
        return len(self.plans)


class _Slicing:
    """torch's fused Adam/AdamW entry points replaced, while any thread steps a chunk with
    mapped state, by a dispatcher that slices only on that thread (threading.local limit) and
    passes every other call through. Reference-counted under a lock: the first user installs
    the dispatchers, the last one puts the originals back, however the users' steps interleave
    (one autograd device thread per GPU may step at once)."""

    lock = threading.Lock()
    users = 0
    originals = {}
    local = threading.local()

    @classmethod
    @contextlib.contextmanager
    def on(cls, torch, limit, cache=None):
        check_slice_limit(limit)  # before anything changes
        with cls.lock:
            if cls.users == 0:
                for name in FUSED_STEPS:
                    if hasattr(torch, name):
                        cls.originals[name] = getattr(torch, name)
                        setattr(torch, name, cls._dispatcher(cls.originals[name]))
            cls.users += 1
        previous = getattr(cls.local, "limit", 0), getattr(cls.local, "cache", None)
        cls.local.limit, cls.local.cache = limit, cache
        try:
            yield
        finally:
            cls.local.limit, cls.local.cache = previous
            with cls.lock:
                cls.users -= 1
                if cls.users == 0:
                    for name, original in cls.originals.items():
                        setattr(torch, name, original)
                    cls.originals.clear()

    @classmethod
    def _dispatcher(cls, original):
        def step(*args, **kwargs):
            limit = getattr(cls.local, "limit", 0)  # checked by on()
            return _sliced_call(original, limit, cls.local.cache, *args, **kwargs) if limit \
                else original(*args, **kwargs)
        return step


class StepInBackwardError(RuntimeError):
    """A training loop did what stepping in the backward pass cannot keep the meaning of."""


class BackwardStep:
    """The in-backward step of one Offload: chunks, the step stream, the state's placement.
    `tier` is the StateTier that holds the state outside the budget where the library has
    uma's tiers (None: mapped state, or all of it resident)."""

    # The staging slots of the host tier's ring, read when an offload starts (at least 2: one
    # chunk steps while the next one's state comes in; state_tier.SLOTS says why 2 is the
    # default).
    staging_slots = state_tier.SLOTS

    def __init__(self, offload, chunk_bytes, use_tiers=False):
        """`use_tiers`: the state outside the budget in uma's host tier where the library has
        it (offload(state_tier=True): not the default yet, see docs/frameworks.md "On the copy
        engines"); else mapped, as before issue 39."""
        self.offload, self.torch = offload, offload.torch
        self.optimizer, self.device = offload.optimizer, offload.device
        self.chunk_bytes = chunk_bytes
        # Chunks alternate between two streams: one chunk's copies and step overlap the next
        # one's (the copy engines busy both ways, more of the link's reads in flight).
        self.streams = [self.torch.cuda.Stream(self.device) for _ in range(STEP_STREAMS)]
        self.stream, self.turn, self._step_streams = self.streams[0], 0, STEP_STREAMS
        self.ready, self.ready_bytes = [], 0
        # (event after a chunk's step, its gradients, their bytes)
        self.inflight = collections.deque()
        self.inflight_bytes = 0
        self.stepped = set()  # ids of the parameters stepped since the last optimizer.step()
        self.mapped = set()  # data_ptr of every mapped state tensor (staged for each step)
        self.mapped_params = set()  # ids of the parameters with mapped state
        # Mapped state is copied into device buffers for its step and back after it (one pass
        # each way however many passes the optimizer's kernels make): for a multi-kernel step
        # (foreach). A fused step reads and writes each element once, and does so faster
        # across the link itself (H200: 72 ms a step against 90 staged).
        self.stage = not all(group.get("fused") for group in self.optimizer.param_groups)
        # Staging copies by kernel (False) or by cudaMemcpyAsync (True: copy_; between managed
        # pointers the driver chooses what runs it).
        self.memcpy_staging = False
        # A fused step of a chunk with mapped state in launches of at most this many elements
        # (sliced()); 0: one launch per chunk as the optimizer issues it.
        self.slice_elements = SLICE_ELEMENTS
        self.slices = PlanCache()  # sliced()'s cache: each chunk's launches
        self.owed = False  # a backward pass stepped and optimizer.step() has not come since
        self.backward_open = False  # between a backward pass's first gradient and its end
        self.stats = {"backward_chunks": 0, "gradient_peak_bytes": 0,
                      "resident_state_bytes": 0, "mapped_state_bytes": 0}
        # Only the optimizer's parameters are stepped and let go: another parameter's gradient
        # stays where the backward pass left it.
        self.stepped_by_optimizer = {id(p) for g in self.optimizer.param_groups
                                     for p in g["params"]}
        self.tier, self.ready_span = None, 0  # ready_span: the ready chunk's bytes in a slot
        if use_tiers and offload.allocator.has_tiers():
            slots = self.staging_slots
            if isinstance(slots, bool) or not isinstance(slots, int) or slots < 2:
                raise ValueError(f"uma_torch: BackwardStep.staging_slots must be an int of at "
                                 f"least 2, not {slots!r}")
            self.reserved, self.state_room, slot = state_tier.size_ring(self, slots)
            if slot:
                self.tier = state_tier.StateTier(self, slot, slots)
        else:
            self.reserved, self.state_room = self._reserve_state()

    def spare_bytes(self):
        """The budget less the resident parameters and a page of rounding at each end of every
        parameter's and state's range: what the optimizer state and the staging ring share."""
        offload = self.offload
        rounding = 2 * PAGE * 3 * offload.param_count
        return offload.budget - offload.stats["resident_parameter_bytes"] - rounding

    def _reserve_state(self, staging=0):
        """(ids of the parameters whose optimizer state stays resident, the bytes of state that
        may): spare_bytes() less `staging` (the ring's device memory), given in the blocks'
        order (the first layers, stepped last) to parameters whose state (estimated as AdamW's:
        two moments of the parameter's size) fits in what is left."""
        room = max(0, self.spare_bytes() - staging)
        reserved, left = set(), room
        for _, _, params in self.offload.blocks:
            for param in params:
                nbytes = 2 * param.numel() * param.element_size()
                if id(param) not in reserved and param.requires_grad and nbytes <= left:
                    reserved.add(id(param))
                    left -= nbytes
        return reserved, room

    @property
    def step_streams(self):
        """How many step streams the chunks alternate between (1 or 2, the default): with one,
        the chunks' steps run one after the other, half as many thread blocks across the link
        at once."""
        return self._step_streams

    @step_streams.setter
    def step_streams(self, count):
        if isinstance(count, bool) or not isinstance(count, int) or \
                not 1 <= count <= STEP_STREAMS:
            raise ValueError(f"uma_torch: step_streams must be 1 or {STEP_STREAMS}, "
                             f"not {count!r}")
        self._step_streams, self.turn = count, 0

    # --- the backward pass ----------------------------------------------------------------

    def gradient_ready(self, param):
        """A parameter's gradient is accumulated: it joins the chunk; a full chunk is stepped.
        The first gradient of a backward pass that follows one not yet ended by
        optimizer.step() is refused (gradient accumulation would step twice). A parameter the
        optimizer does not step is left alone."""
        if id(param) not in self.stepped_by_optimizer:
            return
        if not self.backward_open:
            if self.owed:
                raise StepInBackwardError(
                    "uma_torch.offload(step_in_backward=True): a second backward pass before "
                    "optimizer.step(); the optimizer steps during each backward pass, so "
                    "gradient accumulation is not possible with it (offload without "
                    "step_in_backward for that)")
            self.backward_open = True
        if self.tier is not None:
            span = self.tier.span(param)
            if self.ready and self.ready_span + span > self.tier.slot_bytes:
                self._step_ready()  # its state and the ready chunk's do not fit one slot
            self.ready_span += span
        self.ready.append(param)
        self.ready_bytes += param.numel() * param.element_size()
        if self.ready_bytes >= self.chunk_bytes:
            self._step_ready()

    def backward_done(self):
        """The backward pass ended: the last chunk is stepped, and the compute stream waits for
        every step before the next forward reads the parameters."""
        if self.ready:
            self._step_ready()
        self.backward_open = False
        self._compute_waits()
        self._let_go(wait=False)
        self.slices.sweep()  # the plans of chunks this pass did not step
        if self.tier is not None:
            self.tier.pass_ended()  # the next pass's first fills go ahead

    def _compute_waits(self):
        compute = self.torch.cuda.current_stream(self.device)
        for stream in self.streams:
            compute.wait_stream(stream)

    def _step_ready(self):
        chunk, self.ready, self.ready_bytes, self.ready_span = self.ready, [], 0, 0
        torch = self.torch
        self.stream = self.streams[self.turn]
        self.turn = (self.turn + 1) % self._step_streams
        self.stream.wait_stream(torch.cuda.current_stream(self.device))  # the gradients made
        with torch.cuda.stream(self.stream):
            staged = self._stage_in(chunk) if self.stage else []
            streamed = self.tier.streamed(chunk, self.stream) if self.tier is not None \
                else contextlib.nullcontext()
            with streamed, self._sliced_if_mapped(chunk, staged):
                self.offload._step_only(chunk)
            self._stage_out(staged)
            self.place_new_state(chunk, self.stream, in_backward=True)
            if self.tier is not None:
                self.tier.chunk_done(chunk)
        done = torch.cuda.Event()
        done.record(self.stream)
        grads = [p.grad for p in chunk if p.grad is not None]
        for param in chunk:
            param.grad = None
            self.stepped.add(id(param))
        nbytes = sum(g.numel() * g.element_size() for g in grads)
        self.inflight.append((done, grads, nbytes))
        self.inflight_bytes += nbytes
        self.stats["gradient_peak_bytes"] = max(self.stats["gradient_peak_bytes"],
                                                self.inflight_bytes)
        self.stats["backward_chunks"] += 1
        self.owed = True
        self._let_go(wait=False)

    @contextlib.contextmanager
    def _sliced_if_mapped(self, chunk, staged):
        """While the chunk steps: torch's fused Adam/AdamW steps in launches of at most
        slice_elements (sliced(), _Slicing) on this thread, where the chunk updates mapped state
        in place (not staged, not the first step, which makes the state on the device)."""
        torch = self.torch
        mapped = self.slice_elements and not staged and any(
            id(p) in self.mapped_params for p in chunk)
        if not mapped or not any(hasattr(torch, name) for name in FUSED_STEPS):
            yield
            return
        with _Slicing.on(torch, self.slice_elements, self.slices):
            self.stats["sliced_chunks"] = self.stats.get("sliced_chunks", 0) + 1
            yield

    def _stage_in(self, chunk):
        """[(state dict, key, mapped tensor, device copy)]: each mapped state tensor of `chunk`
        copied into a device buffer, which the step then updates in its place."""
        staged = []
        for param in chunk:
            state = self.optimizer.state.get(param)
            for key, tensor in list(state.items()) if state else []:
                if self.torch.is_tensor(tensor) and tensor.data_ptr() in self.mapped:
                    staged.append((state, key, tensor, self.torch.empty_like(tensor)))
        if staged:
            self._copy([c for _, _, _, c in staged], [t for _, _, t, _ in staged])
            for state, key, _, copy in staged:
                state[key] = copy
        self.stats["staged_bytes"] = self.stats.get("staged_bytes", 0) + sum(
            c.numel() * c.element_size() for _, _, _, c in staged)
        return staged

    def _stage_out(self, staged):
        """The updated copies written back to the mapped state, which takes its place again."""
        if staged:
            self._copy([t for _, _, t, _ in staged], [c for _, _, _, c in staged])
        for state, key, tensor, _ in staged:
            state[key] = tensor

    def _copy(self, destinations, sources):
        """Copies by kernel (torch._foreach_copy_) where there is one: a kernel reads and writes
        mapped memory at up to 40 GB/s each way at once on the H200, where cudaMemcpy (copy_)
        shares ~52 GB/s between the two directions. In launches of at most slice_elements
        elements (in_launches), as the fused step over mapped state is (sliced): a kernel
        across the link holds back the backward pass's kernels for as long as it runs. A pair
        that is not contiguous (a channels_last moment) is copied whole."""
        torch, limit = self.torch, self.slice_elements
        if self.memcpy_staging or not hasattr(torch, "_foreach_copy_"):
            for destination, source in zip(destinations, sources):
                destination.copy_(source, non_blocking=True)
            return
        whole, cut = [], []
        for pair in zip(destinations, sources):
            (cut if limit and all(t.is_contiguous() for t in pair) else whole).append(pair)
        if whole:
            torch._foreach_copy_([d for d, _ in whole], [s for _, s in whole])
        items = ((None, [d.view(-1).split(limit), s.view(-1).split(limit)]) for d, s in cut)
        for _, (into, out_of) in in_launches(items, limit or 1):
            torch._foreach_copy_(into, out_of)

    def _let_go(self, wait):
        """Drops the gradients of the chunks whose step is done (all of them with wait): their
        memory goes back to the allocator only once no stream reads it."""
        while self.inflight and (wait or self.inflight[0][0].query()):
            done, _, nbytes = self.inflight.popleft()
            if wait:
                done.synchronize()
            self.inflight_bytes -= nbytes
        if self.tier is not None:
            self.tier.let_go(wait)

    # --- the optimizer state ----------------------------------------------------------------

    def place_new_state(self, chunk, stream, in_backward=False):
        """State the step just made on `stream` (the first step): resident while the room
        lasts for the parameters it was kept for (_reserve_state: the first layers); else, for
        a chunk stepped in the backward pass (`in_backward`) with the tier, moved into the host
        tier (StateTier.adopt: contiguous state within a slot); else moved onto pages of its
        own (_own_pages; a strided tensor stays where it is), sent to the host once and mapped.
        The plans are held until undo."""
        offload = self.offload
        resident, mapped, tiered = [], [], []
        for param in chunk:
            state = self.optimizer.state.get(param) or {}
            fresh = [(state, key, t) for key, t in state.items()
                     if self.torch.is_tensor(t) and t.is_cuda and t.numel() > 0
                     and t.data_ptr() not in offload.seen_state]
            if not fresh:
                continue
            nbytes = sum(t.numel() * t.element_size() for _, _, t in fresh)
            if id(param) in self.reserved and nbytes <= self.state_room:
                self.state_room -= nbytes
                resident += [t for _, _, t in fresh]
                self.stats["resident_state_bytes"] += nbytes
                if self.tier is not None:
                    self.tier.keep(param, [(key, t) for _, key, t in fresh])
            elif in_backward and self.tier is not None and \
                    self.tier.takes(param, [t for _, _, t in fresh]):
                tiered.append((param, [(key, t) for _, key, t in fresh]))
            else:
                mapped += fresh
                self.mapped_params.add(id(param))
                self.stats["mapped_state_bytes"] += nbytes
        offload.seen_state.update(t.data_ptr() for t in resident)
        # (not the mapped originals: they are freed, and new state may come at their address)
        # A strided moment (a channels_last parameter's) keeps its place and layout: the fused
        # kernels want every list's strides alike, and a copy would be contiguous.
        strided = [t for _, _, t in mapped if not t.is_contiguous()]
        mapped = self._own_pages([m for m in mapped if m[2].is_contiguous()]) + strided
        self.mapped.update(t.data_ptr() for t in mapped)
        offload.seen_state.update(t.data_ptr() for t in mapped)
        if resident or mapped:
            offload._hold_state(resident, mapped, stream)
        if tiered:
            self.tier.adopt(tiered, stream)

    def _own_pages(self, entries):
        """The mapped state [(state dict, key, tensor)] copied into one buffer of its own, each
        tensor page-aligned, with OWN_PAGES_PAD unused bytes at either end: a placement applies
        to whole pages, and the small-block cache packs blocks from many owners into a page, so
        a 4 KiB moment mapped in place would put its neighbours (a LayerNorm's gradient, a bias)
        on the host too, and the kernels writing them would cross the link. (It did not change
        the H200 step time: the backward's slowdown was the mapped update's launches, sliced().)
        Returns the copies, which replace the tensors in the optimizer's state."""
        if not entries:
            return []
        torch = self.torch
        sizes = [-(-t.numel() * t.element_size() // PAGE) * PAGE for _, _, t in entries]
        buffer = torch.empty(sum(sizes) + 2 * OWN_PAGES_PAD + PAGE, dtype=torch.uint8,
                             device=entries[0][2].device)
        offset = OWN_PAGES_PAD + (-(buffer.data_ptr() + OWN_PAGES_PAD)) % PAGE
        copies = []
        for (state, key, tensor), size in zip(entries, sizes):
            nbytes = tensor.numel() * tensor.element_size()
            copy = buffer[offset:offset + nbytes].view(tensor.dtype).view(tensor.shape)
            copy.copy_(tensor)
            state[key] = copy
            copies.append(copy)
            offset += size
        self.stats["own_pages_bytes"] = self.stats.get("own_pages_bytes", 0) + buffer.numel()
        return copies

    # --- optimizer.step() -----------------------------------------------------------------

    def step_called(self):
        """optimizer.step() after a backward pass that stepped: the compute stream waits for
        the steps, and the next backward pass may step again. A parameter stepped in the
        backward pass that has a gradient again (set or changed after backward()) is refused:
        the step used the backward pass's gradient, and would otherwise ignore this one."""
        late = [p for g in self.optimizer.param_groups for p in g["params"]
                if p.grad is not None and id(p) in self.stepped]
        unseen = [p for g in self.optimizer.param_groups for p in g["params"]
                  if p.grad is not None and id(p) not in self.stepped and
                  self.tier is not None and self.tier.holds(p)]
        self._compute_waits()
        self.stepped, self.owed = set(), False
        if unseen:
            raise StepInBackwardError(
                f"uma_torch.offload(step_in_backward=True): {len(unseen)} parameter(s) whose "
                "optimizer state is in the host tier have a gradient at optimizer.step() that "
                "no backward hook saw (set by hand); their state is brought to the device only "
                "for steps in the backward pass. Offload without step_in_backward to set "
                "gradients by hand")
        if late:
            raise StepInBackwardError(
                f"uma_torch.offload(step_in_backward=True): {len(late)} parameter(s) stepped in "
                "the backward pass have a gradient again at optimizer.step() (set or changed "
                "after backward()); the step already used the backward pass's gradients. "
                "Offload without step_in_backward to change gradients before the step")

    def synchronize(self):
        """Waits for every copy between the host tier and the staging slots and drops the
        fills sent ahead: call it before reading or changing state of the host tier in
        optimizer.state in place (state_dict() and load_state_dict() need no call)."""
        if self.tier is not None:
            self.tier.wait()
            self.tier.forget()

    def exposed_transfer_ms(self):
        """How long the step streams waited for the host tier's copies into the staging slots,
        in ms, over every chunk streamed so far (StateTier.exposed_transfer_ms; 0.0 without
        the tier). Waits for those chunks."""
        return self.tier.exposed_transfer_ms() if self.tier is not None else 0.0

    def finish(self):
        """undo(): every step done, every gradient let go, the host tier's state back on the
        device and the staging ring given back."""
        try:
            self._let_go(wait=True)
        finally:
            self.slices.clear()
            tier, self.tier = self.tier, None
            if tier is not None:
                tier.close()
