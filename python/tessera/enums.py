"""PopTorch's enums (poptorch.enums), with PopTorch's values."""
import enum

from .data import DataLoaderMode
from .options import (ConnectionType, MeanReductionStrategy, OutputMode, ReductionType,
                      SyncPattern)


class SharingStrategy(enum.IntEnum):
    SharedMemory = 0
    FileSystem = 1
    Fork = 2
    ForkServer = 3


class HalfFloatCastingBehavior(enum.IntEnum):
    FloatDowncastToHalf = 0
    HalfUpcastToFloat = 1
    Default = 2


class MatMulSerializationMode(enum.Enum):
    InputChannels = "input_channels"
    ReducingDim = "reducing_dim"
    OutputChannels = "output_channels"
    Disabled = "none"


class Liveness(enum.IntEnum):
    AlwaysLive = 0
    OffChipAfterFwd = 1
    OffChipAfterFwdNoOverlap = 2
    OffChipAfterEachPhase = 3


class OverlapMode(enum.Enum):
    NoOverlap = "no_overlap"
    OverlapAccumulationLoop = "overlap_accumulation_loop"
    OverlapDeviceIterationLoop = "overlap_device_iteration_loop"


class AutoStage(enum.IntEnum):
    SameAsIpu = 0
    AutoIncrement = 1


class MultiConvPlanType(enum.IntEnum):
    Parallel = 0
    Serial = 1


class CommGroupType(enum.IntEnum):
    All = 0
    Consecutive = 1
    Orthogonal = 2
    NoGrouping = 3


class VariableRetrievalMode(enum.IntEnum):
    OnePerGroup = 0
    AllReplicas = 2


__all__ = ["AutoStage", "CommGroupType", "ConnectionType", "DataLoaderMode",
           "HalfFloatCastingBehavior", "Liveness", "MatMulSerializationMode",
           "MeanReductionStrategy", "MultiConvPlanType", "OutputMode", "OverlapMode",
           "ReductionType", "SharingStrategy", "SyncPattern", "VariableRetrievalMode"]
