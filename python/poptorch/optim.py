"""PopTorch's optimizers (poptorch.optim): Tessera's, which take PopTorch's
arguments (loss_scaling, velocity_scaling, accumulator types,
max_grad_norm)."""
from tessera.optim import LAMB, SGD, Adam, AdamW, RMSprop

__all__ = ["SGD", "Adam", "AdamW", "RMSprop", "LAMB"]
