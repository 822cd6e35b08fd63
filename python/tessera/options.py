"""PopTorch's `Options`, with its names and defaults.

Setters return the options object, so calls chain as in PopTorch:
``opts.deviceIterations(4).randomSeed(0)``. An option Tessera has no
implementation of yet says so when it is set, never silently later.
"""
import ast
import enum
import json
import os
import re

import torch

from ._errors import Error, not_available


class OutputMode(enum.IntEnum):
    """Which iterations' outputs a host call returns (PopTorch's, with its
    values)."""
    Final = 0
    EveryN = 1
    All = 2
    Sum = 3
    Default = 4


class ReductionType(enum.IntEnum):
    """How accumulated gradients combine (PopTorch's)."""
    Sum = 0
    Mean = 1
    NoReduction = 2


class MeanReductionStrategy(enum.IntEnum):
    """How a mean of accumulated gradients is taken (PopTorch's): as they
    add up, or once at the end; the same mean either way."""
    Running = 0
    Post = 1
    PostAndLoss = 2


class ConnectionType(enum.IntEnum):
    """When the device is attached (PopTorch's): Never compiles only."""
    Always = 0
    OnDemand = 1
    Never = 2


class SyncPattern(enum.IntEnum):
    Full = 0
    SinglePipeline = 1
    ReplicaAndLadder = 2


def _arguments(text):
    """A setter call's arguments: literals, and the enum members and torch
    dtypes the setters take (never evaluated as code)."""
    enums = {"OutputMode": OutputMode, "ReductionType": ReductionType,
             "MeanReductionStrategy": MeanReductionStrategy, "ConnectionType": ConnectionType,
             "SyncPattern": SyncPattern}
    names = {f"{prefix}{name}": e for name, e in enums.items()
             for prefix in ("", "tessera.", "poptorch.", "enums.", "poptorch.enums.")}

    def value(node):
        if isinstance(node, ast.Attribute):
            owner = ast.unparse(node.value)
            if owner in names:
                return names[owner][node.attr]
            if owner == "torch" and node.attr in ("float16", "float32", "half", "float"):
                return getattr(torch, node.attr)
            raise ValueError(f"unknown name {ast.unparse(node)}")
        return ast.literal_eval(node)

    call = ast.parse(f"f({text})", mode="eval").body
    if call.keywords:
        raise ValueError("keyword arguments are not supported")
    return [value(arg) for arg in call.args]


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Error(f"{name} must be a positive integer, got {value!r}")
    return value


class _TrainingOptions:
    def __init__(self, options):
        self._options = options

    def gradientAccumulation(self, gradient_accumulation):
        self._options._values["gradient_accumulation"] = _positive_int(
            "Training.gradientAccumulation", gradient_accumulation)
        return self

    def accumulationAndReplicationReductionType(self, reduction_type):
        if reduction_type not in (ReductionType.Mean, ReductionType.Sum):
            raise Error("Training.accumulationAndReplicationReductionType takes "
                        f"tessera.ReductionType.Mean or Sum, got {reduction_type!r}")
        self._options._values["accumulation_reduction"] = ReductionType(reduction_type).name
        return self

    def setMeanAccumulationAndReplicationReductionStrategy(self, mean_reduction_strategy):
        """Running or Post: the same mean of the gradients either way."""
        MeanReductionStrategy(mean_reduction_strategy)
        return self

    def setAutomaticLossScaling(self, enabled):
        """PopART's automatic loss scaling (--loss-scaling auto)."""
        if enabled:
            self._options._stages["loss_scaling"] = "auto"
        else:
            self._options._stages.pop("loss_scaling", None)
        return self

    def setConvolutionDithering(self, enabled):
        if enabled:
            not_available("Training.setConvolutionDithering(True)", "convolution dithering")
        return self

    @property
    def gradient_accumulation(self):
        return self._options._values["gradient_accumulation"]


class _JitOptions:
    def traceModel(self, trace_model):
        """Models are always traced (torch.jit.trace), as PopTorch 3's
        dispatcher path does not: PopTorch refuses True; Tessera takes both."""
        return self


class _DistributedOptions:
    """Which of several processes this is (PopTorch's Options.Distributed):
    tessera-launch's instances, each running replicationFactor replicas of
    replicationFactor x numProcesses in all. By default read from OpenMPI's
    OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK, as PopTorch does;
    popdist.poptorch.Options sets it from the launcher."""

    def __init__(self, options):
        self._options = options

    def disable(self):
        """One process, whatever the environment says."""
        return self.configureProcessId(0, 1)

    def setEnvVarNames(self, var_num_processes, var_process_id):
        """Reads numProcesses and processId from these environment variables."""
        try:
            count = int(os.environ.get(var_num_processes, "1"))
            index = int(os.environ.get(var_process_id, "0"))
        except ValueError:
            raise Error(f"{var_num_processes}={os.environ.get(var_num_processes)!r} and "
                        f"{var_process_id}={os.environ.get(var_process_id)!r} must be "
                        "whole numbers") from None
        return self.configureProcessId(index, count)

    def configureProcessId(self, process_id, num_processes):
        count = _positive_int("Distributed.configureProcessId's num_processes", num_processes)
        if isinstance(process_id, bool) or not isinstance(process_id, int) or not (
                0 <= process_id < count):
            raise Error(f"Distributed.configureProcessId: process_id {process_id!r} is not in "
                        f"[0, {count})")
        self._options._values["process_id"] = process_id
        self._options._values["num_processes"] = count
        return self

    @property
    def processId(self):
        return self._options._values["process_id"]

    @property
    def numProcesses(self):
        return self._options._values["num_processes"]


class _TensorLocationOptions:
    def _refuse(self, what):
        not_available(f"TensorLocations.{what}", "remote and streaming memory")

    def numIOTiles(self, num_tiles):
        self._refuse("numIOTiles")

    def setActivationLocation(self, location):
        self._refuse("setActivationLocation")

    def setWeightLocation(self, location):
        self._refuse("setWeightLocation")

    def setOptimizerLocation(self, location):
        self._refuse("setOptimizerLocation")

    def setAccumulatorLocation(self, location):
        self._refuse("setAccumulatorLocation")


class _PopartOptions:
    """PopART's own options: Tessera is not PopART, so none applies."""

    def set(self, key, value):
        not_available(f"_Popart.set({key!r})", "PopART options")

    def setEngineOptions(self, engine_options):
        not_available("_Popart.setEngineOptions", "Poplar engine options (use "
                      "POPLAR_ENGINE_OPTIONS' autoReport options for reports)")

    def setPatterns(self, patterns, level=2):
        not_available("_Popart.setPatterns", "PopART patterns")


class _PrecisionOptions:
    def __init__(self, options):
        self._options = options

    def halfFloatCasting(self, half_float_casting):
        """Deprecated in PopTorch, where it does nothing: so here."""
        return self

    def runningStatisticsAlwaysFloat(self, value):
        """Deprecated in PopTorch, where it does nothing: so here."""
        if not isinstance(value, bool):
            raise Error(f"runningStatisticsAlwaysFloat takes True or False, got {value!r}")
        return self

    def enableFloatingPointExceptions(self, enabled):
        """PopTorch traps on the device's floating-point overflow, invalid
        operation and division by zero. The IPU model does not trap: a
        warning says so once; the results are the same."""
        if enabled:
            import warnings
            warnings.warn("Precision.enableFloatingPointExceptions(True): the IPU model "
                          "computes as the chip does but does not trap floating-point "
                          "exceptions; check outputs with torch.isfinite", stacklevel=2)
        return self

    def enableStochasticRounding(self, enabled):
        """fp16 weights' updates round stochastically (a model in fp16:
        model.half(), or an IPUConfig's precision)."""
        if not isinstance(enabled, bool):
            raise Error(f"Precision.enableStochasticRounding takes True or False, got {enabled!r}")
        self._options._values["stochastic_rounding"] = enabled
        return self

    def setPartialsType(self, dtype):
        """The type matmuls and convolutions of a half model (model.half())
        add their partial sums in: torch.float32 (the default; each result
        rounded once to fp16) or torch.float16."""
        if dtype not in (torch.float32, torch.float16):
            raise Error(f"Precision.setPartialsType takes torch.float32 or torch.float16, "
                        f"got {dtype!r}")
        self._options._values["partials_type"] = "half" if dtype == torch.float16 else "float"
        return self


def _report_directory(profile_dir):
    """Where the report pages go: enableProfiling's directory, else Poplar's
    autoReport options in POPLAR_ENGINE_OPTIONS (what Lightning's
    IPUStrategy(autoreport=True) and PopTorch users set), else nowhere."""
    if profile_dir:
        return profile_dir
    text = os.environ.get("POPLAR_ENGINE_OPTIONS")
    if not text:
        return None
    try:
        engine = json.loads(text)
    except json.JSONDecodeError as e:
        raise Error(f"POPLAR_ENGINE_OPTIONS is not valid JSON ({e}): set it to an object "
                    'such as {"autoReport.all": "true", "autoReport.directory": "./report"}'
                    ) from None
    if not isinstance(engine, dict):
        raise Error("POPLAR_ENGINE_OPTIONS must be a JSON object, such as "
                    '{"autoReport.all": "true", "autoReport.directory": "./report"}')
    wanted = any(key.startswith("autoReport.") and key != "autoReport.directory" and
                 str(value).lower() == "true" for key, value in engine.items())
    return str(engine.get("autoReport.directory", ".")) if wanted else None


class Options:
    """What a model is compiled and run with (PopTorch's poptorch.Options)."""

    # The options a file or dictionary may set, with their defaults.
    _DEFAULTS = {
        "device_iterations": 1,
        "replication_factor": 1,
        "gradient_accumulation": 1,
        "accumulation_reduction": "Mean",
        "output_mode": "Default",
        "output_return_period": 1,
        "random_seed": None,
        "cache_dir": None,
        "compile_only": False,
        "ipu_version": 2,
        "available_memory_proportion": None,
        "stochastic_rounding": False,
        "partials_type": "float",
        "profile_dir": None,
        "process_id": 0,
        "num_processes": 1,
    }

    def __init__(self):
        self._values = dict(self._DEFAULTS)
        if os.environ.get("TESSERA_CACHE_DIR"):
            self._values["cache_dir"] = os.environ["TESSERA_CACHE_DIR"]
        elif os.environ.get("POPTORCH_CACHE_DIR"):
            self._values["cache_dir"] = os.environ["POPTORCH_CACHE_DIR"]
        self.Training = _TrainingOptions(self)
        self.Precision = _PrecisionOptions(self)
        self._distributed = _DistributedOptions(self)
        self._distributed.setEnvVarNames("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK")
        # Not file options: the execution strategy, and what an IPUConfig
        # carries beyond PopTorch's options (layers per IPU, recomputation,
        # automatic loss scaling).
        self._strategy = None
        self._stages = {}

    # -- PopTorch's setters --------------------------------------------------

    def deviceIterations(self, device_iterations):
        self._values["device_iterations"] = _positive_int("deviceIterations",
                                                          device_iterations)
        return self

    def replicationFactor(self, replication_factor):
        """Copies of the model, each on its own IPUs with its own slice of
        every batch; a training step sums their gradients (an all-reduce)."""
        replicas = _positive_int("replicationFactor", replication_factor)
        if replicas > 1024:
            raise Error(f"replicationFactor({replicas}): at most 1024 replicas (a Bow Pod1024)")
        self._values["replication_factor"] = replicas
        return self

    def outputMode(self, output_mode, output_return_period=None):
        if not isinstance(output_mode, OutputMode):
            raise Error(f"outputMode takes a tessera.OutputMode, got {output_mode!r}")
        if output_mode == OutputMode.EveryN:
            if output_return_period is None:
                raise Error("outputMode(OutputMode.EveryN) needs output_return_period")
            self._values["output_return_period"] = _positive_int("output_return_period",
                                                                 output_return_period)
        # Another mode ignores a period, as PopTorch does.
        self._values["output_mode"] = output_mode.name
        return self

    def randomSeed(self, random_seed):
        if isinstance(random_seed, bool) or not isinstance(random_seed, int) or random_seed < 0:
            raise Error(f"randomSeed must be a non-negative integer, got {random_seed!r}")
        self._values["random_seed"] = random_seed
        return self

    def enableProfiling(self, profile_dir=None):
        """Writes the report page of every compile (PopTorch's
        enableProfiling): PROFILE_DIR/training/report.html or
        PROFILE_DIR/inference/report.html (default: the current directory).
        Setting Poplar's autoReport options in POPLAR_ENGINE_OPTIONS does the
        same."""
        self._values["profile_dir"] = str(profile_dir) if profile_dir else "."
        return self

    def enableExecutableCaching(self, path):
        self._values["cache_dir"] = str(path) if path else None
        return self

    def useOfflineIpuTarget(self, ipu_version=2):
        if ipu_version not in (1, 2, 21):
            raise Error(f"useOfflineIpuTarget takes ipu_version 1, 2 or 21 (Bow), "
                        f"got {ipu_version!r}")
        self._values["compile_only"] = True
        self._values["ipu_version"] = ipu_version
        return self

    def setAvailableMemoryProportion(self, available_memory_proportion):
        if not isinstance(available_memory_proportion, dict) or not available_memory_proportion:
            raise Error('setAvailableMemoryProportion takes a dictionary such as {"IPU0": 0.5}')
        values = set()
        for ipu, proportion in available_memory_proportion.items():
            if not re.fullmatch(r"IPU\d+", str(ipu)):
                raise Error(f"setAvailableMemoryProportion: '{ipu}' is not an IPU name "
                            "(IPU0, IPU1, ...)")
            if not isinstance(proportion, (int, float)) or not 0 < proportion <= 1:
                raise Error(f"setAvailableMemoryProportion: {ipu} must be in (0, 1], "
                            f"got {proportion!r}")
            values.add(float(proportion))
        if len(values) > 1:
            not_available("different memory proportions per IPU", "models on several IPUs")
        self._values["available_memory_proportion"] = values.pop()
        return self

    def setExecutionStrategy(self, strategy):
        """tessera.PipelinedExecution(...) (the default with blocks on several
        IPUs) or tessera.ShardedExecution(...)."""
        from .blocks import PipelinedExecution, ShardedExecution
        if not isinstance(strategy, (PipelinedExecution, ShardedExecution)):
            raise Error("setExecutionStrategy takes tessera.PipelinedExecution(...) or "
                        f"tessera.ShardedExecution(...), got {strategy!r}")
        self._strategy = strategy
        return self

    @property
    def _execution_strategy(self):
        """The execution strategy (PopTorch's attribute): pipelined unless
        set."""
        from .blocks import PipelinedExecution
        return self._strategy if self._strategy is not None else PipelinedExecution()

    # -- Reading -------------------------------------------------------------

    @property
    def device_iterations(self):
        return self._values["device_iterations"]

    @property
    def replication_factor(self):
        return self._values["replication_factor"]

    @property
    def output_mode(self):
        return OutputMode[self._values["output_mode"]]

    @property
    def random_seed(self):
        return self._values["random_seed"]

    # -- PopTorch's other setters: what the IPU model makes true already,
    # what only names or reports things, and what Tessera cannot do (an
    # error naming it, never a silent no-op).

    def useIpuModel(self, use_model):
        """Tessera always runs on its IPU model (True is what it does; False
        asks for hardware it does not drive)."""
        if not use_model:
            not_available("useIpuModel(False)", "running on IPU hardware")
        return self

    def connectionType(self, connection_type):
        """Always and OnDemand attach when the model first runs; Never
        compiles only (as useOfflineIpuTarget)."""
        connection_type = ConnectionType(connection_type)
        if connection_type == ConnectionType.Never:
            self._values["compile_only"] = True
        return self

    def syncPattern(self, sync_pattern):
        if SyncPattern(sync_pattern) != SyncPattern.Full:
            not_available(f"syncPattern({SyncPattern(sync_pattern).name})",
                          "sync patterns other than Full")
        return self

    def useIpuId(self, ipu_id):
        """Which IPU (or multi-IPU device) to run on: the IPU model is the one."""
        if isinstance(ipu_id, bool) or not isinstance(ipu_id, int) or ipu_id < 0:
            raise Error(f"useIpuId takes a non-negative integer, got {ipu_id!r}")
        return self

    def autoRoundNumIPUs(self, auto_round_num_ipus=True):
        """The IPU model takes any number of IPUs: nothing needs rounding."""
        return self

    def enableSyntheticData(self, enabled):
        if enabled:
            not_available("enableSyntheticData(True)", "synthetic data on the device")
        return self

    def enableStableNorm(self, enabled):
        """Norms' variances are always the mean of squared deviations (the
        stable form)."""
        return self

    def logCycleCount(self, log_cycle_count):
        """The executor's cycleCount() is always available (the estimate the
        IPU model counts)."""
        return self

    def modelName(self, name):
        """A name for PopART's logs: Tessera's reports are named after the
        model's file."""
        return self

    def logDir(self, log_dir):
        """Where PopART writes its logs: Tessera writes none."""
        return self

    def maxRepeatLogs(self, max_lines):
        return self

    def showCompilationProgressBar(self, show=True):
        return self

    def relaxOptimizerAttributesChecks(self, relax=True):
        return self

    def disableModuleNamescope(self):
        return self

    def sourceLocationExcludes(self, excludes):
        return self

    def appendToLocationExcludes(self, *excludes):
        return self

    def broadcastBuffers(self, broadcast_buffers=True):
        """Replicas start from the host's buffers (True, the default);
        False keeps each replica's own, which the runtime does not do."""
        if not broadcast_buffers:
            not_available("broadcastBuffers(False)", "buffers kept per replica on load")
        return self

    def updatableNamedBuffers(self, buffers):
        """The buffers copyNamedBuffersToDevice() copies: that is not built
        (copyWeightsToDevice copies every weight and buffer)."""
        not_available("updatableNamedBuffers", "copyNamedBuffersToDevice")

    def inputReplicaGrouping(self, input_group_size, input_group_type):
        if input_group_size != 1:
            not_available("inputReplicaGrouping", "replicas sharing their inputs")
        return self

    def anchorTensor(self, short_name, long_name, output_mode=None, output_return_period=1):
        not_available("anchorTensor", "anchoring intermediate tensors")

    def defaultOutputMode(self):
        return self._values["output_mode"] == "Default"

    def clone(self):
        import copy
        return copy.deepcopy(self)

    def from_json(self, string):
        """PopTorch's {"Dotted.path.method": value} (a list is the
        arguments; "Enum.Member" strings are enum members)."""
        try:
            values = json.loads(string)
        except json.JSONDecodeError as e:
            raise Error(f"from_json: not valid JSON: {e}") from None
        for path, value in values.items():
            target, *names = path.split(".")
            owner = self
            for name in [target] + names[:-1]:
                owner = getattr(owner, name)
            setter = getattr(owner, names[-1] if names else target) if names else \
                getattr(self, target)
            args = value if isinstance(value, list) else [value]
            args = [_arguments(a)[0] if isinstance(a, str) and "." in a else a for a in args]
            setter(*args)
        return self

    @property
    def Jit(self):
        return _JitOptions()

    @property
    def Distributed(self):
        return self._distributed

    @property
    def TensorLocations(self):
        return _TensorLocationOptions()

    @property
    def _Popart(self):
        return _PopartOptions()

    def toDict(self):
        """Every option by name, as JSON takes it."""
        return dict(self._values)

    def fromDict(self, values):
        """Sets the options `values` names (toDict's names); an unknown name is an
        error naming it."""
        unknown = sorted(set(values) - set(self._DEFAULTS))
        if unknown:
            raise Error(f"unknown option{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(unknown)} (known: {', '.join(sorted(self._DEFAULTS))})")
        setters = {
            "device_iterations": self.deviceIterations,
            "replication_factor": self.replicationFactor,
            "gradient_accumulation": self.Training.gradientAccumulation,
            "accumulation_reduction":
                lambda v: self.Training.accumulationAndReplicationReductionType(
                    ReductionType[v]),
            "random_seed": lambda v: self.randomSeed(v) if v is not None else None,
            "cache_dir": self.enableExecutableCaching,
            "profile_dir": lambda v: self.enableProfiling(v) if v else None,
            "available_memory_proportion":
                lambda v: self.setAvailableMemoryProportion({"IPU0": v}) if v else None,
            "stochastic_rounding": self.Precision.enableStochasticRounding,
        }
        for key, value in values.items():
            if key in setters:
                setters[key](value)
            elif key == "output_mode":
                mode = OutputMode[value]
                period = values.get("output_return_period") if mode == OutputMode.EveryN else None
                self.outputMode(mode, period)
            elif key == "compile_only":
                if value:
                    self.useOfflineIpuTarget(values.get("ipu_version", 2))
            elif key == "num_processes":
                self.Distributed.configureProcessId(values.get("process_id", 0), value)
            elif key == "partials_type":
                self.Precision.setPartialsType(
                    {"float": torch.float32, "half": torch.float16}[value])
        return self

    def toJSON(self):
        return json.dumps(self.toDict(), indent=2, sort_keys=True)

    def loadFromFile(self, filepath):
        """Options from a file: JSON (toJSON's), or PopTorch's format of one
        setter call per line (``deviceIterations(4)``,
        ``Training.gradientAccumulation(2)``)."""
        with open(filepath) as f:
            text = f.read()
        if text.lstrip().startswith("{"):
            try:
                values = json.loads(text)
            except json.JSONDecodeError as e:
                raise Error(f"{filepath}: not valid JSON: {e}") from None
            return self.fromDict(values)
        for number, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            match = re.fullmatch(r"((?:Training\.|Precision\.)?)(\w+)\((.*)\)", line)
            if not match:
                raise Error(f"{filepath}:{number}: expected a setter call such as "
                            f"deviceIterations(4), got '{line}'")
            group, name, args = match.groups()
            target = {"": self, "Training.": self.Training,
                      "Precision.": self.Precision}[group]
            setter = getattr(target, name, None)
            if setter is None or name.startswith("_") or not callable(setter):
                raise Error(f"{filepath}:{number}: unknown option '{group}{name}'")
            try:
                value = _arguments(args)
            except (ValueError, SyntaxError) as e:
                raise Error(f"{filepath}:{number}: cannot read the arguments of "
                            f"'{line}': {e}") from None
            setter(*value)
        return self

    def __repr__(self):
        return "tessera.Options(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"

    # -- What the compiler and runtime take --------------------------------

    def _output_mode_text(self, training):
        mode = self.output_mode
        if mode == OutputMode.Default:
            mode = OutputMode.Final if training else OutputMode.All
        if mode == OutputMode.EveryN:
            return f"every-{self._values['output_return_period']}"
        return mode.name.lower()

    def _compile_options(self, training):
        target = {1: "ipu1", 2: "ipu2", 21: "bow"}[self._values["ipu_version"]]
        options = {
            "target": target,
            "device_iterations": self.device_iterations,
            "output_mode": self._output_mode_text(training),
            # replicationFactor is each process's (PopTorch's): the program
            # all-reduces over every process's replicas.
            "replicas": self.replication_factor * self._values["num_processes"],
        }
        # Only when set: the compiler's default is float, and an unset type
        # leaves the compile (and its cache key) as tessera-compile's.
        if self._values["partials_type"] != "float":
            options["partials_type"] = self._values["partials_type"]
        if self._values["available_memory_proportion"] is not None:
            options["available_memory_proportion"] = self._values["available_memory_proportion"]
        if self._values["cache_dir"]:
            options["cache_dir"] = self._values["cache_dir"]
        report = _report_directory(self._values["profile_dir"])
        if report:
            options["report"] = os.path.join(report, "training" if training else "inference")
        if training:
            options["gradient_accumulation"] = self._values["gradient_accumulation"]
            options["accumulation_reduction"] = self._values["accumulation_reduction"].lower()
            if self._values["stochastic_rounding"]:
                options["stochastic_rounding"] = True
        if self._strategy is not None:
            options["execution"] = self._strategy.mode
        for key, value in self._stages.items():
            if key in ("recompute", "loss_scaling") and not training:
                continue
            options[key] = value
        return options
