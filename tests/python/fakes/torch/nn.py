"""torch.nn stand-in: Module (children, parameters, the four hook registrations offload uses),
ModuleList, Linear, Parameter."""

import itertools

from . import Tensor, autograd

_keys = itertools.count()


class _Handle:
    def __init__(self, table):
        self.table, self.key = table, next(_keys)
        self.removed = False

    def remove(self):
        self.table.pop(self.key, None)
        self.removed = True


def _register(table, hook):
    handle = _Handle(table)
    table[handle.key] = hook
    return handle


class Parameter(Tensor):
    """Takes over the storage of `data` (a Tensor); grad is made on the first backward."""

    requires_grad = True

    def __init__(self, data, requires_grad=True):  # noqa: D107 (no super: adopts storage)
        self.__dict__.update(data.__dict__)
        data._storage = type(data._storage)(0, 0)  # the parameter owns it now
        self.requires_grad, self.grad, self._grad_hooks = requires_grad, None, {}

    def register_post_accumulate_grad_hook(self, hook):
        return _register(self._grad_hooks, hook)

    def _accumulate(self):
        if not self.requires_grad:
            return
        if self.grad is None:
            self.grad = Tensor(self.numel(), self.device)
        for hook in list(self._grad_hooks.values()):
            hook(self)


class Module:
    def __init__(self):
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_parameters", {})
        for table in ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks",
                      "_backward_hooks"):
            object.__setattr__(self, table, {})

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def named_children(self):
        return iter(list(self._modules.items()))

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        for name, param in self._parameters.items():
            if id(param) not in seen:
                seen.add(id(param))
                yield prefix + name, param
        if recurse:
            for child_name, child in self._modules.items():
                for name, param in child.named_parameters(f"{prefix}{child_name}.", True):
                    if id(param) not in seen:
                        seen.add(id(param))
                        yield name, param

    def parameters(self, recurse=True):
        return (param for _, param in self.named_parameters(recurse=recurse))

    def register_forward_pre_hook(self, hook):
        return _register(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook):
        return _register(self._forward_hooks, hook)

    def register_full_backward_pre_hook(self, hook):
        return _register(self._backward_pre_hooks, hook)

    def register_full_backward_hook(self, hook):
        return _register(self._backward_hooks, hook)

    def hook_count(self):
        """All hooks registered on this module and its parameters, recursively (tests)."""
        modules = [self] + [m for child in self._modules.values() for m in child._tree()]
        hooks = sum(len(getattr(m, t)) for m in modules for t in (
            "_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks"))
        return hooks + sum(len(p._grad_hooks) for p in self.parameters())

    def _tree(self):
        return [self] + [m for child in self._modules.values() for m in child._tree()]

    def forward(self, x):
        return x

    def __call__(self, *args):
        autograd.enter(self)
        try:
            for hook in list(self._forward_pre_hooks.values()):
                hook(self, args)
            out = self.forward(*args)
            for hook in list(self._forward_hooks.values()):
                hook(self, args, out)
            return out
        finally:
            autograd.leave()


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for index, module in enumerate(modules):
            setattr(self, str(index), module)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, index):
        return list(self._modules.values())[index]

    def __len__(self):
        return len(self._modules)


class Sequential(ModuleList):
    def forward(self, x):
        for module in self:
            x = module(x)
        return x


class Linear(Module):
    """in_features x out_features float32 weights (and a bias) on `device`."""

    def __init__(self, in_features, out_features, bias=True, device="cuda"):
        super().__init__()
        from . import empty
        self.weight = Parameter(empty(in_features * out_features, device=device))
        if bias:
            self.bias = Parameter(empty(out_features, device=device))
