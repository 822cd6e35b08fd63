"""Tessera's Python API, in PopTorch's shape.

    import tessera
    opts = tessera.Options().deviceIterations(4)
    model = tessera.inferenceModel(torchvision.models.resnet18(), opts)
    logits = model(images)          # compiled on the first call

    training = tessera.trainingModel(net, opts, tessera.optim.SGD(net.parameters(), lr=0.1))
    for x, y in tessera.DataLoader(opts, dataset, batch_size=16):
        output, loss = training(x, y)

Models compile through the same libraries as tessera-compile and run on
the IPU model (tile memory, exchanges and cycle counts of the real chip).
"""
from _tessera import Error, version as __version__

from . import distributed, optim, profile
from .blocks import (BeginBlock, Block, BlockFunction, PipelinedExecution, ShardedExecution,
                     Stage, recomputationCheckpoint, removeBlocks)
from ._model import (LoadedExecutable, identity_loss, inferenceModel, load,
                     registerPostCompileHook, registerPreCompileHook, trainingModel)
from .data import DataLoader
from .ipu_config import IPUConfig
from .options import Options, OutputMode, ReductionType

__all__ = [
    "BeginBlock", "Block", "BlockFunction", "PipelinedExecution", "ShardedExecution", "Stage",
    "recomputationCheckpoint", "removeBlocks",
    "DataLoader", "distributed", "Error", "IPUConfig", "LoadedExecutable", "Options", "OutputMode", "ReductionType",
    "identity_loss", "inferenceModel", "load", "optim", "profile", "registerPostCompileHook",
    "registerPreCompileHook", "trainingModel",
]
