"""torch.optim stand-in: an Optimizer with param_groups and per-parameter state; AdamW makes
two moments per parameter on its first step. Each step logs the parameters it updated (by
address) to torch.cuda.log."""

from . import cuda, zeros_like


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
