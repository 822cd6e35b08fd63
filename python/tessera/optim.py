"""Optimizers with PopTorch's extra arguments (poptorch.optim).

They are torch.optim's classes, so a model trained on the host takes them
as well; trainingModel reads their hyperparameters into the compiled
update. `max_grad_norm` clips the gradients' global norm first (as
``clip_grad_norm_``). `loss_scaling` is a static loss scale (the compiled
step's --loss-scaling); SGD's `velocity_scaling` scales the stored momentum
buffer (the update is unchanged up to rounding). PopTorch's accumulator
types choose the storage of the gradient accumulators (`accum_type`; by
default the gradient's type) and of the optimizer state
(`first_order_momentum_accum_type`, SGD's `velocity_accum_type`,
`second_order_momentum_accum_type`; by default the update's type, fp32 for
fp32 and fp16 weights): torch.float32 or
torch.float16. State is updated in the update's type and rounded to its
own type when stored.
"""
import torch

from ._errors import Error, not_available


_ACCUMULATOR_KEYS = {"accum_type": "accum-type",
                     "first_order_momentum_accum_type": "first-order-momentum-accum-type",
                     "second_order_momentum_accum_type": "second-order-momentum-accum-type"}


def _accumulator_types(**types):
    """PopTorch's accumulator types as graph-optimizer-update's spec keys
    ({"accum-type": "float16", ...}); None leaves the default."""
    chosen = {}
    for name, value in types.items():
        if value is None:
            continue
        if value not in (torch.float32, torch.float16):
            raise Error(f"{name}={value}: use torch.float32 or torch.float16")
        key = _ACCUMULATOR_KEYS[name]
        # fp32 is the state's default: naming it changes nothing compiled.
        if value == torch.float32 and key != "accum-type":
            continue
        chosen[key] = "float32" if value == torch.float32 else "float16"
    return chosen


def _check_scaling(loss_scaling, velocity_scaling):
    for name, value in (("loss_scaling", loss_scaling), ("velocity_scaling", velocity_scaling)):
        if value is not None and (isinstance(value, bool) or
                                  not isinstance(value, (int, float)) or not value > 0):
            raise Error(f"{name} must be a positive number, got {value!r}")


class SGD(torch.optim.SGD):
    def __init__(self, params, lr=0.01, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, maximize=False, loss_scaling=None, velocity_scaling=None,
                 use_combined_accum=None, accum_type=None, velocity_accum_type=None,
                 max_grad_norm=None):
        _check_scaling(loss_scaling, velocity_scaling)
        self.accumulator_types = _accumulator_types(
            accum_type=accum_type, first_order_momentum_accum_type=velocity_accum_type)
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening,
                         weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
        self.loss_scaling = loss_scaling
        self.velocity_scaling = velocity_scaling
        self.max_grad_norm = max_grad_norm


class Adam(torch.optim.Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, maximize=False, loss_scaling=None, accum_type=None,
                 first_order_momentum_accum_type=None,
                 second_order_momentum_accum_type=None, max_grad_norm=None):
        _check_scaling(loss_scaling, None)
        self.accumulator_types = _accumulator_types(
            accum_type=accum_type,
            first_order_momentum_accum_type=first_order_momentum_accum_type,
            second_order_momentum_accum_type=second_order_momentum_accum_type)
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize)
        self.loss_scaling = loss_scaling
        self.max_grad_norm = max_grad_norm


class AdamW(torch.optim.AdamW):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, maximize=False, loss_scaling=None, bias_correction=True,
                 accum_type=None, first_order_momentum_accum_type=None,
                 second_order_momentum_accum_type=None, max_grad_norm=None):
        _check_scaling(loss_scaling, None)
        self.accumulator_types = _accumulator_types(
            accum_type=accum_type,
            first_order_momentum_accum_type=first_order_momentum_accum_type,
            second_order_momentum_accum_type=second_order_momentum_accum_type)
        # PopTorch's: False uses the moments without bias correction.
        self.bias_correction = bool(bias_correction)
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize)
        self.loss_scaling = loss_scaling
        self.max_grad_norm = max_grad_norm


class RMSprop(torch.optim.RMSprop):
    def __init__(self, params, lr=0.01, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, maximize=False, loss_scaling=None, accum_type=None,
                 first_order_momentum_accum_type=None,
                 second_order_momentum_accum_type=None, max_grad_norm=None):
        _check_scaling(loss_scaling, None)
        self.accumulator_types = _accumulator_types(
            accum_type=accum_type,
            first_order_momentum_accum_type=first_order_momentum_accum_type,
            second_order_momentum_accum_type=second_order_momentum_accum_type)
        super().__init__(params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                         momentum=momentum, centered=centered, maximize=maximize)
        self.loss_scaling = loss_scaling
        self.max_grad_norm = max_grad_norm


class LAMB(torch.optim.Optimizer):
    """PopTorch's LAMB: Adam's direction plus weight decay, scaled by the
    trust ratio |w| / |direction| (clipped at max_weight_norm). Trains
    through trainingModel; it has no host step of its own."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 bias_correction=True, loss_scaling=None, max_weight_norm=None,
                 accum_type=None, first_order_momentum_accum_type=None,
                 second_order_momentum_accum_type=None, max_grad_norm=None):
        _check_scaling(loss_scaling, None)
        self.accumulator_types = _accumulator_types(
            accum_type=accum_type,
            first_order_momentum_accum_type=first_order_momentum_accum_type,
            second_order_momentum_accum_type=second_order_momentum_accum_type)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      bias_correction=bias_correction,
                                      max_weight_norm=max_weight_norm))
        self.loss_scaling = loss_scaling
        self.max_grad_norm = max_grad_norm

    def step(self, closure=None):
        raise Error("tessera.optim.LAMB updates weights through trainingModel only")


def hyperparameters(optimizer):
    """(name, {key: value}) of `optimizer` in graph-optimizer-update's terms:
    the name and the compiled spec's keys."""
    if optimizer is None:
        return "sgd", {"lr": 0.01}
    groups = optimizer.param_groups
    first = {k: v for k, v in groups[0].items() if k != "params"}
    for group in groups[1:]:
        if {k: v for k, v in group.items() if k != "params"} != first:
            not_available("parameter groups with different hyperparameters",
                          "per-group optimizer settings")
    g = first
    if g.get("maximize"):
        not_available("maximize=True", "gradient ascent")
    if isinstance(optimizer, torch.optim.SGD):
        name = "sgd"
        values = {"lr": g["lr"], "momentum": g["momentum"], "dampening": g["dampening"],
                  "weight-decay": g["weight_decay"], "nesterov": float(g["nesterov"])}
        velocity_scaling = getattr(optimizer, "velocity_scaling", None)
        if velocity_scaling is not None:
            values["velocity-scaling"] = velocity_scaling
    elif isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        name = "adamw" if isinstance(optimizer, torch.optim.AdamW) else "adam"
        values = {"lr": g["lr"], "beta1": g["betas"][0], "beta2": g["betas"][1],
                  "eps": g["eps"], "weight-decay": g["weight_decay"],
                  "amsgrad": float(g["amsgrad"])}
        if not getattr(optimizer, "bias_correction", True):
            values["bias-correction"] = 0.0
    elif isinstance(optimizer, torch.optim.RMSprop):
        name = "rmsprop"
        values = {"lr": g["lr"], "alpha": g["alpha"], "eps": g["eps"],
                  "weight-decay": g["weight_decay"], "momentum": g["momentum"],
                  "centered": float(g["centered"])}
    elif isinstance(optimizer, LAMB):
        name = "lamb"
        values = {"lr": g["lr"], "beta1": g["betas"][0], "beta2": g["betas"][1],
                  "eps": g["eps"], "weight-decay": g["weight_decay"],
                  "bias-correction": float(g["bias_correction"])}
        if g["max_weight_norm"] is not None:
            values["max-weight-norm"] = g["max_weight_norm"]
    else:
        raise Error(f"{type(optimizer).__name__} is not an optimizer Tessera compiles "
                    "(SGD, Adam, AdamW, RMSprop, tessera.optim.LAMB)")
    max_grad_norm = getattr(optimizer, "max_grad_norm", None)
    if max_grad_norm is not None:
        values["max-grad-norm"] = max_grad_norm
    return name, {k: float(v) for k, v in values.items()}


def accumulator_types(optimizer):
    """The spec keys of the accumulator types `optimizer` chose (empty for
    torch.optim's own classes): structural, so fixed once compiled."""
    return dict(getattr(optimizer, "accumulator_types", {}))


def spec(optimizer):
    """graph-optimizer-update's spec text: "sgd:lr=0.01,momentum=0.9"."""
    name, values = hyperparameters(optimizer)
    items = [f"{k}={v!r}" for k, v in values.items()]
    items += [f"{k}={v}" for k, v in accumulator_types(optimizer).items()]
    return name + ":" + ",".join(items)
