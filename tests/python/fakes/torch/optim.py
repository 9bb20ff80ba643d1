"""torch.optim stand-in: an Optimizer with param_groups and per-parameter state; AdamW makes
two moments per parameter on its first step. Each step logs the parameters it updated (by
address) to torch.cuda.log. state_dict() and load_state_dict() (which copies the state onto
each parameter's device, as PyTorch does) run their hooks."""

import ctypes
import itertools

from . import Tensor, cuda, is_tensor, zeros_like

_keys = itertools.count()


class _Handle:
    def __init__(self, table, hook):
        self.table, self.key = table, next(_keys)
        table[self.key] = hook

    def remove(self):
        self.table.pop(self.key, None)


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.param_groups = [dict(defaults, params=list(params))]
        self.state = {}

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        if all(group.get("fused") for group in self.param_groups):
            return self._fused_step(loss)
        updated = []
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                self._update(param, self.state.setdefault(param, {}))
                updated.append(param.data_ptr())
        cuda.log.append(("optimizer.step", updated))
        return loss

    def _update(self, param, state):
        pass

    def _fused_step(self, loss):
        """fused=True: the state made as _update makes it, then one torch._fused_adamw_ call
        per group (looked up at the call, as torch's optimizers do) with the four lists."""
        import torch
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            for param in params:
                self._update(param, self.state.setdefault(param, {}))
            if params:
                states = [self.state[p] for p in params]
                torch._fused_adamw_(params, [p.grad for p in params],
                                    [s["exp_avg"] for s in states],
                                    [s["exp_avg_sq"] for s in states], [],
                                    [f"step:{p.data_ptr()}" for p in params], lr=group["lr"])
        return loss

    def register_state_dict_pre_hook(self, hook):
        return _Handle(self.__dict__.setdefault("_state_dict_pre_hooks", {}), hook)

    def register_load_state_dict_post_hook(self, hook):
        return _Handle(self.__dict__.setdefault("_load_state_dict_post_hooks", {}), hook)

    def state_dict(self):
        """{"state": {index: the parameter's state dict}, "param_groups": [group with params as
        indices]}, as PyTorch packs it (the state's own tensors), after the pre-hooks."""
        for hook in list(getattr(self, "_state_dict_pre_hooks", {}).values()):
            hook(self)
        index, groups = {}, []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        return {"state": {index[id(p)]: s for p, s in self.state.items() if id(p) in index},
                "param_groups": groups}

    def load_state_dict(self, state_dict):
        """A new state from `state_dict`: each tensor copied into a new one on its parameter's
        device (PyTorch casts the state to its parameter's device), then the post-hooks."""
        params = [p for group in self.param_groups for p in group["params"]]
        self.state = {params[i]: {k: _to(v, params[i].device) if is_tensor(v) else v
                                  for k, v in entries.items()}
                      for i, entries in state_dict["state"].items()}
        for hook in list(getattr(self, "_load_state_dict_post_hooks", {}).values()):
            hook(self)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for param in group["params"]:
                param.grad = None


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, fused=False):
        super().__init__(params, {"lr": lr, "fused": fused})

    def _update(self, param, state):
        if not state:
            state["exp_avg"] = zeros_like(param)
            state["exp_avg_sq"] = zeros_like(param)


def _to(tensor, device):
    """A copy of `tensor` (its bytes) in a new tensor on `device`."""
    out = Tensor(tensor.numel(), device, tensor.dtype, getattr(tensor, "_shape", None))
    if tensor.numel():
        ctypes.memmove(out.data_ptr(), tensor.data_ptr(), tensor.numel() * tensor.element_size())
    return out
