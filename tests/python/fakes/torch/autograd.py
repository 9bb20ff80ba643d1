"""torch.autograd stand-in: the forward records its module calls as a tree; run_backward()
replays it in reverse as PyTorch's engine would reach the modules: a module's full backward
pre-hooks, its children's backward (last call first), then its own parameters' gradients
(made on first use; a parameter used by several modules, a tied weight, is accumulated once, at
its last use in the backward pass, as the engine runs its AccumulateGrad node once all
contributions arrived), then its full backward hooks."""

roots = []
_stack = []
_uses = {}  # id(parameter) -> its uses left in the backward pass being replayed


class Call:
    def __init__(self, module):
        self.module, self.children = module, []


def enter(module):
    call = Call(module)
    (_stack[-1].children if _stack else roots).append(call)
    _stack.append(call)


def leave():
    _stack.pop()


def _backward(call):
    module = call.module
    for hook in list(module._backward_pre_hooks.values()):
        hook(module, ("grad_output",))
    for child in reversed(call.children):
        _backward(child)
    for param in module._parameters.values():
        _uses[id(param)] -= 1
        if _uses[id(param)] == 0:
            param._accumulate()
    for hook in list(module._backward_hooks.values()):
        hook(module, ("grad_input",), ("grad_output",))


def run_backward():
    """loss.backward() of the stand-in: over every module call since the last one."""
    calls = list(roots)
    roots.clear()
    _uses.clear()
    pending = list(calls)
    while pending:
        call = pending.pop()
        pending.extend(call.children)
        for param in call.module._parameters.values():
            _uses[id(param)] = _uses.get(id(param), 0) + 1
    for call in reversed(calls):
        _backward(call)
    engine = Variable._execution_engine
    while engine.callbacks:
        engine.callbacks.pop(0)()


class _Engine:
    """Variable._execution_engine: queue_callback(fn) runs fn when the backward pass ends."""

    def __init__(self):
        self.callbacks = []

    def queue_callback(self, callback):
        self.callbacks.append(callback)


class Variable:
    _execution_engine = _Engine()
