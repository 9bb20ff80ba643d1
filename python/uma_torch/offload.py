"""uma_torch.offload(): an unchanged training loop over parameters, gradients and optimizer state
larger than a device budget (issue 25). Hooks on the model's blocks and a chunked optimizer
step issue uma's residency plans by byte range; docs/frameworks.md "Offload" says what each
plan is and why.
"""

import threading
import time
import types

import uma_c

from .backward_step import BackwardStep, StepInBackwardError

KINDS = ("parameters", "gradients", "optimizer_state")
# policy="auto" (docs/frameworks.md "Offload", why): the optimizer state is read and written once
# a step, so the GPU updates it across the link (remote_map) instead of migrating it in and
# back out through the driver's slow device-to-host path; gradients stay on the device from the
# backward pass that makes them to the step that reads them; the parameters are partitioned
# once ("partition"): as many as fit beside the gradients stay resident (migrate, never
# evicted), the rest are mapped (remote_map) and read and updated across the link. Nothing is
# ever migrated back. policy="dynamic" leaves parameters and gradients to uma's own auto policy.
AUTO_POLICIES = {"parameters": "partition", "gradients": "migrate",
                 "optimizer_state": "remote_map"}
DYNAMIC_POLICIES = {"parameters": "auto", "gradients": "auto", "optimizer_state": "remote_map"}
PAGE = 4096
SMALL = 64 << 10  # parameters below this are kept resident first (see _partition)

_active_lock = threading.RLock()  # undo() inside offload() (a failed start) takes it again
_active = {}  # id(model) -> Offload while it is in force


class OffloadError(RuntimeError):
    """offload() refused: uma is not PyTorch's allocator, the model is not in uma's memory, or
    it is offloaded already. Nothing was changed."""


def _policies(policy):
    """{kind: policy}: "auto" (AUTO_POLICIES), "dynamic" (DYNAMIC_POLICIES), one of uma's
    policies for parameters and gradients, or a dict by kind over AUTO_POLICIES."""
    if policy == "auto":
        policies = dict(AUTO_POLICIES)
    elif policy == "dynamic":
        policies = dict(DYNAMIC_POLICIES)
    elif isinstance(policy, str):
        policies = dict(AUTO_POLICIES, parameters=policy, gradients=policy)
    elif isinstance(policy, dict):
        unknown = sorted(set(policy) - set(KINDS))
        if unknown:
            raise ValueError(f"uma_torch.offload: unknown kind(s) {', '.join(unknown)} in "
                             f"policy; known: {', '.join(KINDS)}")
        policies = dict(AUTO_POLICIES, **policy)
    else:
        raise TypeError(f"uma_torch.offload: policy must be a str or a dict by kind, not "
                        f"{type(policy).__name__}")
    for kind, name in policies.items():
        known = list(uma_c.RESIDENCY_POLICIES) + (["partition"] if kind == "parameters" else [])
        if name not in known:
            raise ValueError(f"uma_torch.offload: policy {name!r} for {kind} is not one of "
                             f"{', '.join(known)} (or \"auto\", \"dynamic\" for all kinds)")
    if policies["gradients"] == "discard":
        raise ValueError("uma_torch.offload: gradients cannot use 'discard' (an eviction before "
                         "the optimizer step would drop them); they are dead after the step")
    return policies


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"uma_torch.offload: {name} must be an int, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"uma_torch.offload: {name} must be at least 1, not {value}")
    return value


def tensor_range(tensor):
    """(address, bytes) a plan names for `tensor`: its own elements when contiguous, else the
    whole storage behind it; None for an empty tensor."""
    if tensor.is_contiguous():
        ptr, nbytes = tensor.data_ptr(), tensor.numel() * tensor.element_size()
    else:
        storage = tensor.untyped_storage()
        ptr, nbytes = storage.data_ptr(), storage.nbytes()
    return (ptr, nbytes) if ptr and nbytes else None


def ranges_of(tensors):
    """The distinct ranges of `tensors` (overlapping ones, which share a block, merged;
    touching ones kept apart: a range must lie inside one block)."""
    spans = sorted({r for r in map(tensor_range, tensors) if r is not None})
    merged = []
    for ptr, nbytes in spans:
        if merged and ptr < merged[-1][0] + merged[-1][1]:
            start, size = merged[-1]
            merged[-1] = (start, max(size, ptr + nbytes - start))
        else:
            merged.append((ptr, nbytes))
    return merged


def walk_blocks(torch, model):
    """[(name, module, parameters, layer)]: each child of a ModuleList or Sequential (its whole
    subtree; `layer` True), and every other module owning parameters directly (those only;
    `layer` False), in registration order. Parameters shared by several blocks (tied weights)
    are in each."""
    containers = tuple(getattr(torch.nn, name) for name in ("ModuleList", "Sequential")
                       if hasattr(torch.nn, name))
    blocks = []

    def walk(prefix, module):
        own = list(module.parameters(recurse=False))
        if own:
            blocks.append((prefix or "(model)", module, own, False))
        for name, child in module.named_children():
            full = f"{prefix}.{name}" if prefix else name
            if isinstance(child, containers):
                for index, sub in child.named_children():
                    params = list(dict.fromkeys(sub.parameters()))
                    if params:
                        blocks.append((f"{full}.{index}", sub, params, True))
            else:
                walk(full, child)

    walk("", model)
    return blocks


def find_blocks(torch, model):
    """[(name, module, parameters)]: walk_blocks without the layer flag."""
    return [(name, module, params) for name, module, params, _ in walk_blocks(torch, model)]


class _Ordering:
    """Stream ordering of the plans' moves. With a side stream: the side stream first waits for
    the compute work enqueued so far (so an eviction never races a kernel still using the data),
    the moves go on it, and an event after them is what the compute stream waits for before the
    block runs. Without one (no torch.cuda.Stream): the moves go on uma's lanes and a plan
    returns once they are done (wait_complete)."""

    def __init__(self, torch, device, side_stream):
        self.torch, self.device = torch, device
        self.side = torch.cuda.Stream(device) if side_stream else None

    def compute(self):
        return self.torch.cuda.current_stream(self.device)

    def mark(self, stream=None):
        """An event recorded on `stream` (the compute stream by default), or None."""
        if self.side is None:
            return None
        event = self.torch.cuda.Event()
        event.record(stream if stream is not None else self.compute())
        return event

    def before_plan(self):
        if self.side is not None:
            self.side.wait_event(self.mark())

    def plan_options(self):
        return {"stream": self.side} if self.side is not None else {"wait_complete": True}

    def after_plan(self):
        return self.mark(self.side)

    def wait(self, event):
        """The compute stream waits for a plan's moves."""
        if event is not None:
            self.compute().wait_event(event)

    def finish(self, event):
        """The host waits for the compute work up to `event` (before a dead, which has no
        stream: its discard must not overtake a kernel still reading the data)."""
        if event is not None:
            event.synchronize()
        else:
            self.torch.cuda.current_stream(self.device).synchronize()


class _Hold:
    """One plan held: the range lists it named (one will_access per kind), the event its moves
    end with, and which of its lists are gradients (dead after the step)."""

    __slots__ = ("lists", "event", "grads", "done")

    def __init__(self):
        self.lists, self.event, self.grads, self.done = [], None, [], None


def _chunked_step(optimizer, closure=None, **kwargs):
    """optimizer.step while offloaded: Offload._step of the optimizer's offload."""
    return optimizer._uma_offload._step(closure, **kwargs)


class Offload:
    """What offload() returns: the hooks in force. undo() (or leaving the with block) removes
    them; `stats` counts the plans issued, the ones sent ahead, and refusals."""

    def __init__(self, torch, allocator, model, optimizer, settings):
        self.torch, self.allocator, self.model, self.optimizer = torch, allocator, model, optimizer
        self.device, self.lookahead = settings["device"], settings["lookahead"]
        self.policies, self.chunk_bytes = settings["policies"], settings["chunk_bytes"]
        self.grads_dead = settings["grads_dead_after_step"]
        self.restore_budget = settings["restore_budget"]
        self.ordering = _Ordering(torch, self.device, settings["side_stream"])
        self.blocks = find_blocks(torch, model)
        self.order = list(range(len(self.blocks)))  # the forward order once seen
        self.trace, self.phase = [], "idle"
        self.held, self.ahead = {}, {}  # block -> [_Hold]; (phase, index) -> _Hold
        self.pending_grads, self.planned_grads, self.seen_state = [], set(), set()
        self.handles, self.step_replaced, self.stepping = [], False, False
        self.stats = {"plans": 0, "ahead": 0, "refused_ahead": 0, "refused_gradients": 0,
                      "dead_bytes": 0, "dead_refused": 0, "step_chunks": 0,
                      "resident_parameter_bytes": None, "forward_hook_seconds": 0.0,
                      "backward_hook_seconds": 0.0, "gradient_hook_seconds": 0.0}
        self.backward_done_hook = self._timed("backward", self._backward_done)
        unique = {id(p): p for p in model.parameters()}.values()
        params = sum(p.numel() * p.element_size() for p in unique)
        trainable = sum(p.numel() * p.element_size() for p in unique if p.requires_grad)
        self.cycle = {"cycle_bytes": params + trainable, "cycle_plans": 2 * len(self.blocks)}
        self.resident, self.grads_fit = None, False
        self.budget, self.trainable, self.param_count = settings["budget"], trainable, len(unique)
        # The optimizer state stays on the device when everything fits (see _state_fits).
        self.state_resident = False
        # Stepping in the backward pass makes gradients transient (backward_step.py): the
        # budget then holds the parameters and the optimizer state only.
        in_backward = settings["step_in_backward"]
        if self.policies["parameters"] == "partition":
            self.resident, self.grads_fit = self._partition(
                settings["budget"], list(unique), 0 if in_backward else trainable)
        # Dead gradients are dropped pages the next backward pass faults in again: worth it
        # only where they may have been evicted (and would move back), not where they stay.
        self.grads_dead = self.grads_dead and not self.grads_fit
        # The partition fits whole: nothing moves after the first step, so the plans are made
        # once and held (no per-block hooks): see _install_static.
        self.static = self.resident is not None and self.grads_fit and \
            self.policies["optimizer_state"] == "remote_map"
        self.backward_step = None
        if in_backward:
            self._check_step_in_backward(optimizer)
            self.backward_step = BackwardStep(self, settings["backward_chunk_bytes"],
                                              settings["state_tier"])
        self.active = True

    def _check_step_in_backward(self, optimizer):
        if optimizer is None:
            raise OffloadError("uma_torch.offload: step_in_backward needs the optimizer")
        if not self.static or len(self.resident) != self.param_count:
            raise OffloadError(
                "uma_torch.offload: step_in_backward needs every parameter resident within "
                f"the budget ({self.stats['resident_parameter_bytes']} of "
                f"{sum(p.numel() * p.element_size() for p in self.model.parameters())} bytes "
                "fit) and policy \"auto\"; raise the budget or offload without it")

    def _partition(self, budget, params, grad_bytes):
        """(ids of the parameters that stay resident, whether the gradients fit): as many
        parameters as fit in the budget beside every gradient, with a page of rounding at each
        end of every range; the small ones first (biases, norms: read in both passes, and
        sharing pages with each other, which had better share one policy), then the blocks'
        order."""
        room = budget - grad_bytes - 2 * PAGE * 2 * len(params)
        ordered = list({id(p): p for _, _, block in self.blocks for p in block}.values())
        ordered.sort(key=lambda p: p.numel() * p.element_size() >= SMALL)  # stable: block order
        resident, used = set(), 0
        for param in ordered:
            nbytes = param.numel() * param.element_size()
            if used + nbytes <= room:
                resident.add(id(param))
                used += nbytes
        self.stats["resident_parameter_bytes"] = used
        return resident, room >= 0

    # --- hooks ----------------------------------------------------------------------------

    def install_hooks(self):
        if self.static:
            self._install_static()
        else:
            self._install_block_hooks()
        self._install_grad_hooks()
        if self.optimizer is not None:
            self.original_step = self.optimizer.step
            self.had_own_step = "step" in vars(self.optimizer)
            # A method of the optimizer (not of this object): an LR scheduler made later wraps
            # optimizer.step by rebinding its __func__ to the optimizer, and must reach _step.
            self.step_method = types.MethodType(_chunked_step, self.optimizer)
            self.optimizer._uma_offload = self
            self.optimizer.step = self.step_method
            self.step_replaced = True

    def _install_static(self):
        """Every parameter planned once and held until undo: the resident part placed
        (migrate), the rest mapped (remote_map), written by the step (mode write). The hold is
        self.held["static"]."""
        params = list({id(p): p for p in self.model.parameters()}.values())
        hold = self._issue([(params, "write", "parameters")])
        self.ordering.wait(hold.event)
        self.held["static"] = [hold]

    def _install_block_hooks(self):
        enter, leave = self._timed("forward", self._forward_pre), \
            self._timed("forward", self._leave)
        enter_back, leave_back = self._timed("backward", self._backward_pre), \
            self._timed("backward", self._leave)
        for index, (_, module, params) in enumerate(self.blocks):
            self.handles.append(module.register_forward_pre_hook(
                lambda m, args, i=index: enter(i)))
            self.handles.append(module.register_forward_hook(
                lambda m, args, out, i=index: leave(i)))
            self.handles.append(module.register_full_backward_pre_hook(
                lambda m, grad_out, i=index: enter_back(i)))
            self.handles.append(module.register_full_backward_hook(
                lambda m, grad_in, grad_out, i=index: leave_back(i)))

    def _timed(self, phase, hook):
        """`hook` wrapped to add its time to stats[phase + "_hook_seconds"]: the host time the
        hooks take from the thread that runs the model's forward or backward pass (whose
        kernels wait for it), reported so that a step slower than the device's work can be told
        from one slower than the link."""
        key = phase + "_hook_seconds"

        def timed(*args):
            started = time.perf_counter()
            try:
                return hook(*args)
            finally:
                self.stats[key] += time.perf_counter() - started
        return timed

    def _install_grad_hooks(self):
        grad_ready = self._timed("gradient", self._grad_ready)
        seen = set()
        for param in self.model.parameters():
            if param.requires_grad and id(param) not in seen and \
                    hasattr(param, "register_post_accumulate_grad_hook"):
                seen.add(id(param))
                self.handles.append(param.register_post_accumulate_grad_hook(grad_ready))

    def _grad_ready(self, param):
        if self.backward_step is not None:
            if self.phase != "backward":
                self.backward_step.gradient_ready(param)  # may refuse: before any change
                self.phase = "backward"
                self._queue_backward_done()
                return
            return self.backward_step.gradient_ready(param)
        self.pending_grads.append(param)
        if self.static and self.phase != "backward":  # the first gradient of a backward pass
            self.phase = "backward"
            self._queue_backward_done()

    def _queue_backward_done(self):
        engine = getattr(getattr(self.torch.autograd, "Variable", None), "_execution_engine",
                         None)
        if engine is not None and hasattr(engine, "queue_callback"):
            engine.queue_callback(self.backward_done_hook)  # runs when this backward pass ends

    def _forward_pre(self, index):
        if self.phase == "backward" and self._holding():  # recomputation (checkpointing)
            return self._enter(("backward", index), index, self._backward_order())
        if self.phase != "forward" or (index in self.trace and not self._holding()):
            self._new_pass()
        if index not in self.trace:
            self.trace.append(index)
        self._enter(("forward", index), index, self.order)

    def _backward_pre(self, index):
        if self.phase != "backward":
            if self.trace:
                self.order = self.trace + [i for i in self.order if i not in self.trace]
            self._release_ahead("forward")
            self.phase = "backward"
            self._queue_backward_done()
        self._flush_grads()
        self._enter(("backward", index), index, self._backward_order(), with_grads=True)

    def _backward_done(self):
        """The backward pass ended (gradient accumulation: a forward may come before the
        step): plans sent ahead for it end, the gradients it made are planned."""
        if self.phase == "backward":
            self._release_ahead("backward")
            self._flush_grads()
            self.phase = "idle"
            if self.backward_step is not None:
                self.backward_step.backward_done()
            if self.optimizer is None:  # no step will end the gradients' plans: end them now
                for hold in self.held.pop("gradients", []):
                    self._end(hold)
                self.planned_grads = set()

    def _flush_held_grads(self):
        """Static plans: the gradients made since the last flush planned (write, on the
        device where they were made) and held until the step has read them."""
        grads = [p.grad for p in self.pending_grads if p.grad is not None
                 and p.grad.data_ptr() not in self.planned_grads]
        self.pending_grads.clear()
        if grads:
            self.planned_grads.update(g.data_ptr() for g in grads)
            self.held.setdefault("gradients", []).append(
                self._issue([(grads, "write", "gradients")]))

    def _backward_order(self):
        return self.order[::-1]

    def _new_pass(self):
        if self.trace:
            self.order = self.trace + [i for i in self.order if i not in self.trace]
        self._release_ahead(None)
        self.trace, self.phase = [], "forward"

    def _holding(self):
        return any(self.held.values())

    # --- plans ----------------------------------------------------------------------------

    def _will_access(self, hold, ranges, mode, policy, grads):
        if not ranges:
            return
        cycle = self.cycle if policy == "auto" else {}
        self.allocator.will_access(ranges, device=self.device, mode=mode, policy=policy,
                                   **self.ordering.plan_options(), **cycle)
        hold.lists.append(ranges)
        if grads:
            hold.grads.append(ranges)
        self.stats["plans"] += 1

    def _issue(self, groups):
        """One hold over `groups` [(tensors, mode, kind)]: all planned, or none (a refusal
        ends what was planned and raises)."""
        hold = _Hold()
        self.ordering.before_plan()
        try:
            for tensors, mode, kind in groups:
                for part, policy in self._split(tensors, kind):
                    self._will_access(hold, ranges_of(part), mode, policy, kind == "gradients")
        except Exception:
            self._end(hold)
            raise
        hold.event = self.ordering.after_plan()
        return hold

    def _state_fits(self, state):
        """Whether the optimizer state `state` (made by the first step, on the device) fits in
        the budget beside every parameter (all resident) and every gradient, a page of rounding
        at each end of every range: then it stays there (migrate) rather than going to the host
        to be updated across the link, and offload costs nothing when the budget holds it all
        (measured on the H100: mapped state made a step 4.3x slower at a budget of twice it)."""
        if self.resident is None or len(self.resident) != self.param_count:
            return False
        state_bytes = sum(t.numel() * t.element_size() for t in state)
        rounding = 2 * PAGE * 2 * (self.param_count + len(state))
        needed = self.stats["resident_parameter_bytes"] + self.trainable + state_bytes + rounding
        return needed <= self.budget

    def _split(self, tensors, kind):
        """[(tensors, policy)]: the parameters by the partition (resident ones migrate, the
        others remote_map), the optimizer state resident when it fits (_state_fits), any other
        kind whole with its policy."""
        if kind == "optimizer_state" and self.state_resident:
            return [(tensors, "migrate")]
        if kind != "parameters" or self.resident is None:
            return [(tensors, self.policies[kind])]
        tensors = list(tensors)
        return [([t for t in tensors if id(t) in self.resident], "migrate"),
                ([t for t in tensors if id(t) not in self.resident], "remote_map")]

    def _block_groups(self, index, with_grads):
        params = self.blocks[index][2]
        groups = [(params, "read", "parameters")]
        if with_grads:  # accumulating into gradients of an earlier backward pass
            grads = [p.grad for p in params if p.grad is not None]
            self.planned_grads.update(g.data_ptr() for g in grads)
            groups.append((grads, "write", "gradients"))
        return groups

    def _enter(self, key, index, sequence, with_grads=False):
        hold = self.ahead.pop(key, None)
        if hold is None:
            hold = self._issue(self._block_groups(index, with_grads))
        self.ordering.wait(hold.event)
        self.held.setdefault(index, []).append(hold)
        position = sequence.index(index) if index in sequence else len(sequence)
        for following in sequence[position + 1:position + 1 + self.lookahead]:
            ahead_key = (key[0], following)
            if ahead_key in self.ahead or self.held.get(following):
                continue
            try:
                self.ahead[ahead_key] = self._issue(self._block_groups(following, with_grads))
                self.stats["ahead"] += 1
            except uma_c.UmaMemoryError:
                self.stats["refused_ahead"] += 1  # planned at its own turn instead
                break

    def _leave(self, index):
        stack = self.held.get(index)
        if stack:
            self._end(stack.pop())

    def _end(self, hold, dead=False):
        for ranges in hold.lists:
            self.allocator.done_with(ranges)
        if dead:
            for ranges in hold.grads:
                self._dead(ranges)
        hold.lists, hold.grads = [], []

    def _dead(self, ranges):
        """Declares the ranges dead; one refused (a page it shares with data a plan still
        holds: a small gradient beside a parameter in one slab) is left as it is and counted:
        dead saves moves, the step must not fail for it."""
        try:
            self.allocator.dead(ranges)
            self.stats["dead_bytes"] += sum(n for _, n in ranges)
            return
        except uma_c.UmaError as error:
            if error.status_name != "UMA_ERR_INVALID_ARGUMENT" or len(ranges) == 1:
                if error.status_name != "UMA_ERR_INVALID_ARGUMENT":
                    raise
                self.stats["dead_refused"] += 1
                return
        for one in ranges:
            self._dead([one])

    def _release_ahead(self, phase):
        for key in [k for k in self.ahead if phase is None or k[0] == phase]:
            self._end(self.ahead.pop(key))

    def _flush_grads(self):
        """Plans the gradients made since the last flush (charged to the account, evictable):
        they were written on the device before any plan could name them."""
        if self.static:
            return self._flush_held_grads()
        grads = [p.grad for p in self.pending_grads if p.grad is not None
                 and p.grad.data_ptr() not in self.planned_grads]
        self.pending_grads.clear()
        if not grads:
            return
        self.planned_grads.update(g.data_ptr() for g in grads)
        try:
            self._end(self._issue([(grads, "write", "gradients")]))
        except uma_c.UmaMemoryError:
            self.stats["refused_gradients"] += 1  # the optimizer step plans them

    # --- the optimizer step ---------------------------------------------------------------

    def _state_tensors(self, param):
        state = self.optimizer.state.get(param, {}) if hasattr(self.optimizer.state, "get") \
            else {}
        return [v for v in state.values() if self.torch.is_tensor(v) and v.is_cuda
                and v.numel() > 0]

    def _chunks(self):
        """The optimizer's parameters with a gradient, in order, in chunks of at most
        chunk_bytes of what the step places on the device (a bigger parameter alone)."""
        placed_state = self.policies["optimizer_state"] != "remote_map"
        chunks, current, size = [], [], 0
        for group in self.optimizer.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                nbytes = 2 * param.numel() * param.element_size()
                if placed_state:
                    nbytes += sum(t.numel() * t.element_size() for t in self._state_tensors(param))
                if current and size + nbytes > self.chunk_bytes:
                    chunks.append(current)
                    current, size = [], 0
                current.append(param)
                size += nbytes
        return chunks + ([current] if current else [])

    def _step_groups(self, chunk):
        state = [t for p in chunk for t in self._state_tensors(p)]
        return [(chunk, "write", "parameters"), ([p.grad for p in chunk], "read", "gradients"),
                (state, "write", "optimizer_state")]

    def _step(self, closure=None, **kwargs):
        """optimizer.step, chunk by chunk: each chunk's parameters, gradients and state planned
        (the next chunk's sent ahead), the original step run on that chunk alone (with the
        keyword arguments given, e.g. GradScaler's), then its plan ended (gradients dead). A
        closure re-evaluates the model: then one plain step."""
        if self.stepping:  # the original step reached this again (a wrapper made since)
            return type(self.optimizer).step(self.optimizer, closure, **kwargs)
        if closure is not None or not self.active:
            return self.original_step(closure, **kwargs) if closure is not None else \
                self.original_step(**kwargs)
        if self.backward_step is not None:
            return self._after_backward_step(kwargs)
        self.stepping = True
        try:
            return self._static_step(kwargs) if self.static else self._chunked(kwargs)
        finally:
            self.stepping = False

    def _after_backward_step(self, kwargs):
        """optimizer.step() when the backward pass stepped: a parameter with a gradient that no
        backward hook saw (set by hand) is stepped now; then the compute stream waits for the
        backward pass's steps."""
        if kwargs:
            raise StepInBackwardError(
                "uma_torch.offload(step_in_backward=True): optimizer.step() with arguments "
                f"({', '.join(sorted(kwargs))}, e.g. from a GradScaler) cannot be honoured: the "
                "backward pass already stepped; offload without step_in_backward")
        self.backward_step.step_called()
        rest = [p for group in self.optimizer.param_groups for p in group["params"]
                if p.grad is not None]
        if rest:
            self._step_only(rest)
            self.backward_step.place_new_state(rest, self.ordering.compute())
        return None

    def _step_only(self, params):
        """The original step on `params` alone (the others' groups emptied meanwhile)."""
        members = {id(p) for p in params}
        groups = self.optimizer.param_groups
        saved = [group["params"] for group in groups]
        self.stepping = True
        try:
            for group, group_params in zip(groups, saved):
                group["params"] = [p for p in group_params if id(p) in members]
            self.original_step()
            self.stats["step_chunks"] += 1
        finally:
            for group, group_params in zip(groups, saved):
                group["params"] = group_params
            self.stepping = False

    def _hold_state(self, resident, mapped, stream):
        """Plans held until undo for optimizer state made on `stream`: `resident` stays on the
        device (migrate), `mapped` goes to the host once and is mapped (remote_map). `stream`
        waits for the plans' moves."""
        hold = _Hold()
        side = self.ordering.side
        if side is not None:
            side.wait_stream(stream)  # after the step that wrote the state
        try:
            if mapped:
                moves = (side or stream).cuda_stream
                for ptr, nbytes in ranges_of(mapped):
                    self.allocator.prefetch(ptr, nbytes, uma_c.DEVICE_HOST, moves)
                self._will_access(hold, ranges_of(mapped), "write", "remote_map", False)
            if resident:
                self._will_access(hold, ranges_of(resident), "write", "migrate", False)
        except Exception:
            self._end(hold)
            raise
        hold.event = self.ordering.after_plan()
        if hold.event is not None:
            stream.wait_event(hold.event)
        self.held.setdefault("static", []).append(hold)

    def _static_step(self, kwargs):
        """Static plans: the step runs whole (everything it touches is resident or mapped and
        held); then the state it made (the first step) goes to the host and is mapped and
        held, and the gradients' plans end."""
        self._flush_grads()
        try:
            result = self.original_step(**kwargs)
            self.stats["step_chunks"] += 1
            params = [p for group in self.optimizer.param_groups for p in group["params"]]
            fresh = [t for p in params for t in self._state_tensors(p)
                     if t.data_ptr() not in self.seen_state]
            if fresh:
                self.state_resident = self._state_fits(fresh)
                if not self.state_resident:
                    self._new_state(params)
                self.seen_state.update(t.data_ptr() for t in fresh)
                hold = self._issue([(fresh, "write", "optimizer_state")])
                self.ordering.wait(hold.event)
                self.held["static"].append(hold)
        finally:
            for hold in self.held.pop("gradients", []):
                self._end(hold)
            self.phase, self.planned_grads = "idle", set()
        return result

    def _chunked(self, kwargs):
        self._release_ahead(None)
        self._flush_grads()
        self.phase = "step"
        chunks = self._chunks()
        groups = self.optimizer.param_groups
        saved = [group["params"] for group in groups]
        previous, result = None, None
        try:
            for k, chunk in enumerate(chunks):
                hold = self._step_plan(k, chunks)
                members = {id(p) for p in chunk}
                for group, params in zip(groups, saved):
                    group["params"] = [p for p in params if id(p) in members]
                result = self.original_step(**kwargs)
                self._new_state(chunk)
                hold.done = self.ordering.mark()
                if previous is not None:
                    self._end_step(previous)
                previous = hold
                self.stats["step_chunks"] += 1
        finally:
            for group, params in zip(groups, saved):
                group["params"] = params
            if previous is not None:
                self._end_step(previous)
            self._release_ahead(None)
            self.phase, self.planned_grads = "idle", set()
        return result

    def _step_plan(self, k, chunks):
        """Chunk k's plan in force (sent ahead, or issued now), the next chunk's sent ahead."""
        hold = self.ahead.pop(("step", k), None) or self._issue(self._step_groups(chunks[k]))
        self.ordering.wait(hold.event)
        if k + 1 < len(chunks) and self.lookahead:
            try:
                self.ahead[("step", k + 1)] = self._issue(self._step_groups(chunks[k + 1]))
                self.stats["ahead"] += 1
            except uma_c.UmaMemoryError:
                self.stats["refused_ahead"] += 1
        return hold

    def _end_step(self, hold):
        if self.grads_dead and hold.grads:
            self.ordering.finish(hold.done)  # dead has no stream: the step must be done
        self._end(hold, dead=self.grads_dead)

    def _new_state(self, chunk):
        """Optimizer state made by this step (the first): with remote_map it belongs on the host,
        so it goes there once, ordered after the step wrote it; the next step's plan maps it."""
        if self.policies["optimizer_state"] != "remote_map":
            return
        stream = self.ordering.compute().cuda_stream
        for ptr, nbytes in ranges_of(t for p in chunk for t in self._state_tensors(p)):
            if ptr not in self.seen_state:
                self.seen_state.add(ptr)
                self.allocator.prefetch(ptr, nbytes, uma_c.DEVICE_HOST, stream)

    # --- undo -----------------------------------------------------------------------------

    def undo(self):
        """Removes every hook, ends every plan held or sent ahead, gives the optimizer its own
        step back and restores the device's budget. A second call does nothing."""
        if not self.active:
            return
        self.active = False
        for handle in self.handles:
            handle.remove()
        self.handles = []
        if self.step_replaced:
            # Only where optimizer.step is still ours: something that wrapped it since (an LR
            # scheduler) keeps its wrapper, which now reaches the original step (inactive).
            if vars(self.optimizer).get("step") == self.step_method:
                if self.had_own_step:
                    self.optimizer.step = self.original_step
                else:
                    del self.optimizer.step
            self.step_replaced = False
        try:
            if self.backward_step is not None:
                self.backward_step.finish()
            self._release_ahead(None)
            for stack in self.held.values():
                while stack:
                    self._end(stack.pop())
            self.allocator.set_device_budget(self.device, self.restore_budget)
        finally:
            if getattr(self, "pool_state", None) is not None:
                self.pool_state.undo()
            with _active_lock:
                _active.pop(id(self.model), None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.undo()


def _cuda_tensors(model, optimizer):
    """[(what, tensor)]: the model's parameters and gradients and the optimizer's parameters
    and state, each once; raises OffloadError for one that is not on a cuda device."""
    out, seen = [], set()

    def add(what, tensor):
        if tensor is None or id(tensor) in seen:
            return
        seen.add(id(tensor))
        if not getattr(tensor, "is_cuda", False):
            raise OffloadError(f"uma_torch.offload: {what} is on {tensor.device}, not a cuda "
                               "device; move the model to cuda (after uma_torch.install()) "
                               "before offloading it")
        out.append((what, tensor))

    for name, param in model.named_parameters():
        add(f"parameter {name!r}", param)
        add(f"the gradient of {name!r}", param.grad)
    if optimizer is not None:
        for g, group in enumerate(optimizer.param_groups):
            for i, param in enumerate(group["params"]):
                add(f"optimizer parameter {i} of group {g}", param)
                for key, value in optimizer.state.get(param, {}).items():
                    if getattr(value, "is_cuda", False):
                        add(f"optimizer state {key!r} of parameter {i} of group {g}", value)
    return out


def _to_host(torch, allocator, tensors, device):
    """Moves every tensor's pages to the host, so that the account (empty) and the pages agree
    before the first plan; a tensor in memory uma did not hand out raises OffloadError."""
    prefetch_all(torch, allocator, tensors, device, uma_c.DEVICE_HOST)


def prefetch_all(torch, allocator, tensors, device, target):
    """Prefetches every tensor's pages to `target` (a device, or DEVICE_HOST) on the current
    stream of `device` and waits for it; a tensor in memory uma did not hand out raises
    OffloadError."""
    stream = torch.cuda.current_stream(device).cuda_stream
    for what, tensor in tensors:
        span = tensor_range(tensor)
        if span is None:
            continue
        try:
            allocator.prefetch(span[0], span[1], target, stream)
        except uma_c.UmaError as error:
            if error.status_name != "UMA_ERR_UNKNOWN_POINTER":
                raise
            raise OffloadError(
                f"uma_torch.offload: {what} is not in memory uma handed out: it was allocated "
                "under another allocator. Build the model under a uma_torch.pool() (with pool: "
                "model = ...), or call uma_torch.install() first, before anything touches "
                "CUDA, then build the model and the optimizer") from error
    torch.cuda.current_stream(device).synchronize()


def _settings(torch, allocator, model, tensors, budget_bytes, policy, device, lookahead,
              chunk_bytes, grads_dead_after_step, side_stream, step_in_backward,
              state_tier=False):
    """The checked arguments (raises TypeError/ValueError/OffloadError, changing nothing)."""
    _positive("budget_bytes", budget_bytes)
    if state_tier and not step_in_backward:
        raise ValueError("uma_torch.offload: state_tier=True streams the optimizer state of "
                         "step_in_backward=True; pass both, or neither")
    if state_tier and not allocator.has_tiers():
        raise OffloadError("uma_torch.offload: state_tier=True needs a libuma_c.so with the "
                           "tiers (issue 39: uma_host_alloc, uma_copy); use a newer uma")
    if isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 0:
        raise ValueError(f"uma_torch.offload: lookahead must be an int >= 0, not {lookahead!r}")
    policies = _policies(policy)
    if not tensors:
        raise OffloadError("uma_torch.offload: the model has no parameters")
    if device is None:
        device = tensors[0][1].device.index or 0
    elif hasattr(device, "type"):
        device = device.index or 0
    elif isinstance(device, str) and device.startswith("cuda"):
        device = int(device.partition(":")[2] or 0)
    for what, tensor in tensors:
        if (tensor.device.index or 0) != device:
            raise OffloadError(f"uma_torch.offload: {what} is on cuda:{tensor.device.index}, "
                               f"not on the offload's device cuda:{device}")
    if not allocator.has_plans():
        raise OffloadError("uma_torch.offload: this libuma_c.so has no residency plan calls "
                           "(it predates issue 25); use a newer uma")
    report = allocator.residency()
    if device >= len(report["devices"]):
        raise OffloadError(f"uma_torch.offload: uma has no device {device} (it has "
                           f"{report['device_count']})")
    previous = report["devices"][device]
    return {"device": device, "lookahead": lookahead, "policies": policies,
            "budget": budget_bytes,
            "chunk_bytes": _positive("chunk_bytes", chunk_bytes or max(1, budget_bytes // 4)),
            "grads_dead_after_step": bool(grads_dead_after_step),
            "step_in_backward": bool(step_in_backward),
            "state_tier": bool(state_tier),
            "backward_chunk_bytes": _positive("chunk_bytes", chunk_bytes or 64 << 20),
            "side_stream": bool(side_stream) and hasattr(torch.cuda, "Stream"),
            "restore_budget": previous["budget_bytes"] or previous["memory_bytes"]}


def offload(model, optimizer=None, budget_bytes=None, policy="auto", device=None, lookahead=1,
            chunk_bytes=None, grads_dead_after_step=True, side_stream=True,
            step_in_backward=False, state_tier=False, pool=None):
    """Runs an unchanged training loop of `model` (and `optimizer`) with at most `budget_bytes`
    of its parameters, gradients and optimizer state resident on the device; see
    docs/frameworks.md "Offload". Returns an Offload (undo() or a with block ends it).
    Without an optimizer, with the default policy, where the library has the host tier
    (uma_c.Allocator.has_tiers), the model is run for inference instead: the layers that do
    not fit stream through device staging buffers (docs/frameworks.md "Inference beyond the
    device budget"); then it returns a uma_torch.streaming.StreamedInference.
    `state_tier=True` (with step_in_backward=True, a library with the tiers): the optimizer
    state outside the budget lives in uma's host tier and streams through device staging slots
    on the copy engines instead of being mapped (docs/frameworks.md "On the copy engines";
    not the default: not yet measured faster). The model's state is uma's memory: made under
    a uma_torch.pool (`pool`, or the pool found holding the parameters; its gradients and the
    optimizer's state are then kept in that pool: uma_torch.pool_offload) or under
    uma_torch.install(). Raises OffloadError, TypeError or ValueError (nothing changed), UmaError
    from the library."""
    from .pool_offload import PoolState, offload_allocator
    import torch
    if budget_bytes is None:
        raise TypeError("uma_torch.offload: budget_bytes is required (the device bytes the "
                        "model's persistent state may keep resident)")
    with _active_lock:
        if id(model) in _active:
            raise OffloadError("uma_torch.offload: this model is offloaded already; undo() "
                               "that first")
        alloc, pool = offload_allocator(pool, model)
        tensors = _cuda_tensors(model, optimizer)
        settings = _settings(torch, alloc, model, tensors, budget_bytes, policy, device,
                             lookahead, chunk_bytes, grads_dead_after_step, side_stream,
                             step_in_backward, state_tier)
        if optimizer is None and policy == "auto" and not step_in_backward and \
                alloc.has_tiers():
            from .streaming import StreamedInference  # (it imports this module)
            handle = StreamedInference.start(torch, alloc, model, tensors, settings)
            _active[id(model)] = handle
            return handle
        alloc.set_device_budget(settings["device"], budget_bytes)
        handle = pooled = None
        try:
            if pool is not None:  # before offload's hooks: its gradient hook runs first
                pooled = PoolState.enter(torch, pool, model, optimizer)
                tensors = _cuda_tensors(model, optimizer)  # the gradients now in the pool
            _to_host(torch, alloc, tensors, settings["device"])
            handle = Offload(torch, alloc, model, optimizer, settings)
            handle.pool_state = pooled
            if pooled is not None:
                pooled.wrap_step(handle)
            handle.install_hooks()
        except BaseException:
            if handle is not None:
                handle.undo()  # the hooks registered so far, the pool's, and the budget
            else:
                if pooled is not None:
                    pooled.undo()
                alloc.set_device_budget(settings["device"], settings["restore_budget"])
            raise
        _active[id(model)] = handle
        return handle
