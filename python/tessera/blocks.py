"""PopTorch's placement annotations: BeginBlock, Block, BlockFunction,
Stage, PipelinedExecution, ShardedExecution, recomputationCheckpoint.

A BeginBlock on a submodule places it, and what runs after it, on its IPU:
the model is compiled with one block rule per BeginBlock, by the
submodule's path (tessera-compile's graph-assign-stages `blocks`), and
runs pipelined over the IPUs (PipelinedExecution, the default) or in turn
(ShardedExecution). Block and BlockFunction place the operations of a
forward pass: traced, each leaves a mark around its operations that the
TorchScript importer reads. A recomputation checkpoint returns its input;
--recompute's modes choose checkpoints.
"""
import contextlib
import functools

import torch

from ._errors import Error

def _place(ipu_id, what):
    if ipu_id is None:
        return
    if isinstance(ipu_id, bool) or not isinstance(ipu_id, int) or ipu_id < 0:
        raise Error(f"{what}: ipu_id must be a non-negative integer, got {ipu_id!r}")


def BeginBlock(layer, user_id=None, ipu_id=None):
    """`layer` and what runs after it run on `ipu_id` (PopTorch's
    poptorch.BeginBlock). A module is marked and returned itself, as
    PopTorch does (its parameters keep their names); a function is wrapped
    in a module that calls it."""
    _place(ipu_id, "BeginBlock")
    if user_id is not None and not isinstance(user_id, str):
        raise Error(f"BeginBlock: user_id must be a string, got {user_id!r}")
    if not isinstance(layer, torch.nn.Module):
        if not callable(layer):
            raise Error(f"BeginBlock takes a module or a function, got {type(layer).__name__}")
        layer = _BlockFunctionModule(layer)
    if _BLOCK in layer.__dict__:
        raise Error(f"BeginBlock: this {type(layer).__name__} already begins a block "
                    f"{layer.__dict__[_BLOCK]}")
    layer.__dict__[_BLOCK] = (user_id, ipu_id)
    return layer


_BLOCK = "_tessera_begin_block"


def removeBlocks(module):
    """Takes every BeginBlock off `module` and its submodules (PopTorch's)."""
    for m in module.modules():
        m.__dict__.pop(_BLOCK, None)
    return module


def begin_block_of(module):
    """(user_id, ipu_id) of the block `module` begins, or None."""
    return module.__dict__.get(_BLOCK)


class _BlockFunctionModule(torch.nn.Module):
    """A function begun a block with BeginBlock (PopTorch's LegacyBeginBlockFn)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


class _Tracing:
    """What Blocks meet while a model is traced for compiling: the execution
    strategy their stages come from, and the IPUs they name."""
    current = None

    def __init__(self, strategy):
        self.strategy = strategy
        self.ipus = set()

    def __enter__(self):
        _Tracing.current = self
        return self

    def __exit__(self, *exc):
        _Tracing.current = None


@contextlib.contextmanager
def Block(user_id=None, ipu_id=None):
    """`with tessera.Block(ipu_id=1):` -- the operations inside run on that
    IPU (PopTorch's poptorch.Block), and the operations after it too, until
    the next block starts. Traced, the block leaves a mark
    (torch.autograd.profiler.record_function) the TorchScript importer
    places the operations by."""
    _place(ipu_id, "Block")
    tracing = _Tracing.current
    if ipu_id is None and tracing is not None and tracing.strategy is not None:
        ipu_id = tracing.strategy.ipu_of(user_id)  # its stage's (Stage.ipu)
    if ipu_id is None or tracing is None or not torch.jit.is_tracing():
        yield
        return
    tracing.ipus.add(ipu_id)
    stage = tracing.strategy.stage_of(user_id) if tracing.strategy is not None else None
    mark = f"tessera.block ipu={ipu_id}" + (f" stage={stage}" if stage is not None else "")
    with torch.autograd.profiler.record_function(mark):
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
    """A pipeline stage of blocks, by their user ids (PopTorch's poptorch.Stage)."""

    def __init__(self, *block_ids):
        if not block_ids or not all(isinstance(b, str) for b in block_ids):
            raise Error("Stage takes the user ids (strings) of its blocks")
        self.block_ids = block_ids
        self._ipu = None

    def ipu(self, ipu):
        """Runs the stage's blocks on IPU `ipu` (those that name none)."""
        _place(ipu, "Stage.ipu")
        self._ipu = ipu
        return self


class _Execution:
    mode = None

    def __init__(self, *stages):
        # Stages in order: Stage objects, or a block's user id each.
        self.stages = [s if isinstance(s, Stage) else Stage(s) for s in stages]

    def stage_of(self, user_id):
        """The stage a block's user id is in, or None (a stage per IPU)."""
        for index, stage in enumerate(self.stages):
            if user_id in stage.block_ids:
                return index
        return None

    def ipu_of(self, user_id):
        """The IPU a block's stage names (Stage.ipu), or None."""
        index = self.stage_of(user_id)
        return None if index is None else self.stages[index]._ipu


class PipelinedExecution(_Execution):
    """Blocks run as a pipeline over IPUs (PopTorch's poptorch.PipelinedExecution):
    each IPU works on another micro-batch."""
    mode = "pipelined"


class ShardedExecution(_Execution):
    """Blocks run one after another on their IPUs (PopTorch's
    poptorch.ShardedExecution)."""
    mode = "sharded"


def block_rules(model, strategy=None):
    """One "PATH=IPU[:STAGE]" rule per BeginBlock of `model` with an IPU,
    by its path in `model` (what tracing keeps in the op names)."""
    rules = []
    for name, module in model.named_modules():
        block = begin_block_of(module)
        if block is None:
            continue
        user_id, ipu = block
        if ipu is None and strategy is not None:
            ipu = strategy.ipu_of(user_id)
        if ipu is not None:
            if not name:
                raise Error("BeginBlock wraps the whole model: wrap its submodules instead")
            stage = strategy.stage_of(user_id) if strategy is not None else None
            rules.append(f"{name}={ipu}" + (f":{stage}" if stage is not None else ""))
    return rules


def recomputationCheckpoint(*tensors):
    """Where a pipelined backward pass would recompute activations from;
    returns its inputs (nothing is recomputed without pipelining)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tensors[0]  # one list or tuple of them: the same back
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        raise Error("recomputationCheckpoint takes tensors")
    return tensors[0] if len(tensors) == 1 else tensors
