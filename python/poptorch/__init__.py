"""PopTorch's Python API on Tessera: scripts written for PopTorch
(`import poptorch`) compile with Tessera and run on its IPU model.

This package is installed with Tessera (scripts/build.sh puts python/ on
/usr/bin/python3's path, after site-packages): where Graphcore's PopTorch is
installed, `import poptorch` finds it first, so it is never shadowed;
`poptorch.__tessera__` is True for this one. Every name is Tessera's own
(tessera.inferenceModel, tessera.Options, ...) under PopTorch's name; what
Tessera cannot do raises poptorch.Error naming the feature. See
docs/python.md.
"""
import os

from tessera import (BeginBlock, Block, BlockFunction, DataLoader, Error, IPUConfig,
                     LoadedExecutable, Options, PipelinedExecution, ShardedExecution, Stage,
                     identity_loss, inferenceModel, load, profile, recomputationCheckpoint,
                     registerPostCompileHook, registerPreCompileHook, removeBlocks,
                     trainingModel)
from tessera.data import AsynchronousDataAccessor, DataLoaderMode
from tessera.ops import (dynamic_slice, dynamic_update, for_loop, ipu_print_tensor,
                         isRunningOnIpu, nop, serializedMatMul, set_available_memory)
from tessera._model import InferenceExecutor, TrainingExecutor
from tessera import __version__ as _tessera_version

from . import enums, optim
from .enums import (AutoStage, CommGroupType, ConnectionType, HalfFloatCastingBehavior,
                    Liveness, MatMulSerializationMode, MeanReductionStrategy, MultiConvPlanType,
                    OutputMode, OverlapMode, ReductionType, SharingStrategy, SyncPattern,
                    VariableRetrievalMode)

__tessera__ = True
# The PopTorch release whose API this follows, and Tessera's own.
__version__ = "3.3.0+tessera." + _tessera_version

PoplarExecutor = (InferenceExecutor, TrainingExecutor)


class RecoverableError(Error):
    """PopTorch's error after which the device can be used again."""


class UnrecoverableError(Error):
    """PopTorch's error after which the device must be reset."""


def _ipu_model_forced():
    # PopTorch answers "no hardware" when POPTORCH_IPU_MODEL (or
    # POPTORCH_SMALL_IPU_MODEL) is a non-zero integer.
    for name in ("POPTORCH_IPU_MODEL", "POPTORCH_SMALL_IPU_MODEL"):
        value = os.environ.get(name)
        if value is not None:
            try:
                if int(value) != 0:
                    return True
            except ValueError:
                raise Error(f"{name} must be an integer, got {value!r}") from None
    return False


def ipuHardwareIsAvailable(num_ipus=1):
    """Whether a device of `num_ipus` IPUs is there to run on. Tessera's device
    is its IPU model, which stands in for the hardware: True for 1 to 64
    IPUs, so a script (or Lightning's accelerator="ipu") that checks before
    using the IPU goes on to use it; False, as PopTorch answers, when
    POPTORCH_IPU_MODEL asks for PopTorch's IPU Model instead."""
    return (not _ipu_model_forced() and isinstance(num_ipus, int) and
            not isinstance(num_ipus, bool) and 1 <= num_ipus <= 64)


def ipuHardwareVersion():
    """The IPU version the device runs as: 2 (Mk2, ipu2, the default target;
    useOfflineIpuTarget compiles for 1 and Bow, 21, too). Like PopTorch, an
    AssertionError when there is no device (POPTORCH_IPU_MODEL set)."""
    assert ipuHardwareIsAvailable(), "No IPU hardware available on this system"
    return 2


def setLogLevel(level):
    """PopTorch's log level: Tessera's tools say what they do on standard
    error; the level is accepted ("TRACE", "DEBUG", "INFO", "WARN", "ERR",
    "OFF", or 0 to 5)."""
    levels = ("TRACE", "DEBUG", "INFO", "WARN", "ERR", "OFF")
    if not (level in levels or (isinstance(level, int) and 0 <= level < len(levels))):
        raise Error(f"setLogLevel takes one of {', '.join(levels)} or 0 to 5, got {level!r}")


__all__ = [
    "AsynchronousDataAccessor", "AutoStage", "BeginBlock", "Block", "BlockFunction",
    "CommGroupType", "ConnectionType", "DataLoader", "DataLoaderMode", "Error",
    "HalfFloatCastingBehavior", "IPUConfig", "Liveness", "LoadedExecutable",
    "MatMulSerializationMode", "MeanReductionStrategy", "MultiConvPlanType", "Options",
    "OutputMode", "OverlapMode", "PipelinedExecution", "RecoverableError", "ReductionType",
    "ShardedExecution", "SharingStrategy", "Stage", "SyncPattern", "UnrecoverableError",
    "VariableRetrievalMode", "dynamic_slice", "dynamic_update", "enums", "for_loop",
    "identity_loss", "inferenceModel", "ipuHardwareIsAvailable", "ipuHardwareVersion",
    "ipu_print_tensor", "isRunningOnIpu", "load", "nop", "optim", "profile",
    "recomputationCheckpoint", "removeBlocks", "serializedMatMul", "set_available_memory", "setLogLevel", "trainingModel",
]
