"""PopTorch's placement annotations: BeginBlock, Block, BlockFunction,
Stage, recomputationCheckpoint.

Pipelining a model over several IPUs has not landed: a block placed on
IPU 0 (or with no IPU) is the whole model's placement today and compiles;
one that names another IPU is an error where it is written, never
silently ignored. A recomputation checkpoint marks where a pipelined
backward pass would recompute from; without pipelining nothing is
recomputed, so it returns its input.
"""
import contextlib
import functools

import torch

from ._errors import Error, not_available

def _place(ipu_id, what):
    if ipu_id is None:
        return
    if isinstance(ipu_id, bool) or not isinstance(ipu_id, int) or ipu_id < 0:
        raise Error(f"{what}: ipu_id must be a non-negative integer, got {ipu_id!r}")
    if ipu_id != 0:
        not_available(f"{what}(ipu_id={ipu_id})", "placing layers on several IPUs "
                      "(pipelined and sharded execution)")


class BeginBlock(torch.nn.Module):
    """Wraps `layer`: it and what follows run on `ipu_id` (PopTorch's
    poptorch.BeginBlock)."""

    def __init__(self, layer, user_id=None, ipu_id=None):
        super().__init__()
        _place(ipu_id, "BeginBlock")
        self.layer = layer
        self.user_id = user_id
        self.ipu_id = ipu_id

    def forward(self, *args, **kwargs):
        return self.layer(*args, **kwargs)


@contextlib.contextmanager
def Block(user_id=None, ipu_id=None):
    """`with tessera.Block(ipu_id=0):` — the operations inside run there."""
    _place(ipu_id, "Block")
    yield


def BlockFunction(user_id=None, ipu_id=None):
    """A decorator: the function's operations run on `ipu_id`."""
    _place(ipu_id, "BlockFunction")

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with Block(user_id, ipu_id):
                return fn(*args, **kwargs)
        return wrapper
    return decorate


class Stage:
    """A pipeline stage of blocks (PopTorch's poptorch.Stage)."""

    def __init__(self, *block_ids):
        not_available("Stage", "pipelined execution")


class PipelinedExecution:
    """Blocks run as a pipeline over IPUs (PopTorch's poptorch.PipelinedExecution)."""

    def __init__(self, *stages):
        not_available("PipelinedExecution", "pipelined execution over several IPUs")


class ShardedExecution:
    """Blocks run one after another on their IPUs (PopTorch's
    poptorch.ShardedExecution)."""

    def __init__(self, *stages):
        not_available("ShardedExecution", "sharded execution over several IPUs")


def recomputationCheckpoint(*tensors):
    """Where a pipelined backward pass would recompute activations from;
    returns its inputs (nothing is recomputed without pipelining)."""
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        raise Error("recomputationCheckpoint takes tensors")
    return tensors[0] if len(tensors) == 1 else tensors
