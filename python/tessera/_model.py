"""inferenceModel and trainingModel: a PyTorch module compiled for the IPU
and run on the IPU model, with PopTorch's semantics.

The module is traced with torch.jit.trace at one micro-batch of the first
call's inputs (or `compile`'s), imported through the TorchScript importer
and compiled by the same library call as tessera-compile; the executable
then keeps the weights (and, training, the optimizer state) on the device
between calls. The host's copy of the weights is brought up to date
lazily: on copyWeightsToHost, and when the executor's parameters(),
named_parameters() or state_dict() are read.
"""
import collections
import copyreg
import inspect
import keyword
import os
import re
import tempfile
import warnings
import weakref

import numpy as np
import torch

import _tessera

from ._errors import Error
from . import blocks as _blocks
from . import optim as _optim
from .options import Options

# torch dtypes -> the importer's --input-type names.
_INPUT_TYPES = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
    torch.uint8: "ui8", torch.bool: "i1",
}


_HALF = (torch.float16, torch.bfloat16)


def _trace(model, example, call):
    """torch.jit.trace of `model` at `example`, the tensors of `call`, the
    model's outputs, and whether it was traced through _flat_call (when the
    call is more than tensors in the forward's leading parameters, or the
    outputs more than tensors).

    PyTorch's CPU kernels mostly lack fp16 (a model.half() cannot run on the
    host), so a model with 16-bit float weights or inputs is traced as an
    fp32 copy; its 16-bit tensors then take their own types back in the
    trace, and the importer, which types every op from its operands, builds
    the 16-bit graph. Exact: fp16 values survive fp32 unchanged."""
    tensors = dict(model.named_parameters())
    tensors.update(model.named_buffers())
    half = {n for n, t in tensors.items() if t.dtype in _HALF}
    widened = model
    if half or any(e.dtype in _HALF for e in example):
        import copy
        widened = copy.deepcopy(model)
        with torch.no_grad():
            for name, t in list(widened.named_parameters()) + list(widened.named_buffers()):
                if name in half:
                    t.data = t.data.float()
        example = tuple(e.float() if e.dtype in _HALF else e for e in example)
    target = widened if call.plain else _flat_call(widened, call)
    outputs = target(*example)
    if target is widened and _flatten(outputs)[1] != _flatten(outputs, tensors_only=True)[1]:
        target = _flat_call(widened, call)  # None or numbers among the outputs
        outputs = target(*example)
    outputs = getattr(target, "outputs", outputs)
    traced = torch.jit.trace(target, example, check_trace=False, strict=False)
    if widened is model:
        return traced, outputs, target is not widened
    # The trace holds the copy's tensors, which its two runs (in training
    # mode) updated: batch norms' running statistics and step counts. It
    # takes the model's own values, in their own types.
    prefix = "" if target is widened else "model."
    with torch.no_grad():
        for name, t in list(traced.named_parameters()) + list(traced.named_buffers()):
            name = name[len(prefix):] if name.startswith(prefix) else name
            if name in tensors:
                t.data = tensors[name].detach().clone()
    return traced, outputs, target is not widened


# The training executor of each module: an inference model of the same
# module compiles (and, after more training, recompiles) with the weights
# the device trained, as PopTorch's inference model of a trained model does.
_TRAINING = weakref.WeakKeyDictionary()


def identity_loss(x, reduction):
    """Marks `x` as the loss (PopTorch's identity_loss): "sum", "mean" or
    "none" (x is already the loss)."""
    if reduction == "sum":
        return x.sum()
    if reduction == "mean":
        return x.mean()
    if reduction == "none":
        return x
    raise Error(f"identity_loss: reduction must be 'sum', 'mean' or 'none', got {reduction!r}")


# Arguments and outputs as PopTorch takes them: tensors, nested in tuples,
# lists and dicts, with None, Python numbers and strings among them. A
# spec is that nesting with every tensor a numbered leaf and everything
# else a constant: ("tensor", i), ("const", value), ("tuple" | "list",
# [specs]) or ("dict", type, [(key, spec)]). The traced function takes the
# tensors alone, in the spec's order; the constants are compiled in.
_CONSTANTS = (type(None), bool, int, float, complex, str)


def _split(value, where, name, leaves, names, sort_dicts=False):
    """`value`'s spec; its tensors are appended to `leaves`, named for the
    traced function (`names`) after their place in it. With `sort_dicts`
    (inputs), a dict's keys are taken in sorted order, so that a call's
    dicts may list them in any order (as PopTorch takes them)."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        leaves.append(value)
        names.append(name)
        return ("tensor", len(leaves) - 1)
    if isinstance(value, _CONSTANTS):
        return ("const", value)
    if isinstance(value, (tuple, list)):
        kind = "tuple" if isinstance(value, tuple) else "list"
        return (kind, [_split(v, f"{where}[{i}]", f"{name}_{i}", leaves, names, sort_dicts)
                       for i, v in enumerate(value)])
    if isinstance(value, dict):
        items = list(value.items())
        if sort_dicts:
            items.sort(key=lambda kv: str(kv[0]))
        return ("dict", type(value),
                [(k, _split(v, f"{where}[{k!r}]", f"{name}_{k}", leaves, names, sort_dicts))
                 for k, v in items])
    raise Error(f"{where} is a {type(value).__name__}: the model takes tensors, tuples, "
                "lists and dicts of them, None, and Python numbers and strings")


def _join(spec, leaves):
    """The value of `spec` with its tensors taken from `leaves`."""
    kind = spec[0]
    if kind == "tensor":
        return leaves[spec[1]]
    if kind == "const":
        return spec[1]
    if kind == "dict":
        return spec[1]((k, _join(v, leaves)) for k, v in spec[2])
    items = [_join(v, leaves) for v in spec[1]]
    return tuple(items) if kind == "tuple" else items


def _shape_of(spec):
    """`spec` without its constants' values: what must match for a call to
    run the compiled model."""
    kind = spec[0]
    if kind in ("tensor", "const"):
        return kind
    if kind == "dict":
        return ("dict", tuple((k, _shape_of(v)) for k, v in spec[2]))
    return (kind, tuple(_shape_of(v) for v in spec[1]))


def _has_tensor(spec):
    kind = spec[0]
    if kind in ("tensor", "const"):
        return kind == "tensor"
    return any(_has_tensor(v) for v in (spec[1] if kind != "dict" else [v for _, v in spec[2]]))


def _flatten(value, where="the model's output", tensors_only=False):
    """The tensors of a model's output and its spec; `tensors_only`, the
    spec of the same nesting with only its tensors (what a trace can
    return)."""
    leaves = []
    spec = _split(value, where, "output", leaves, [])
    return leaves, (_drop_constants(spec) if tensors_only else spec)


def _drop_constants(spec):
    kind = spec[0]
    if kind == "dict":
        return ("dict", spec[1], [(k, _drop_constants(v)) for k, v in spec[2]
                                  if _drop_constants(v) is not None])
    if kind in ("tuple", "list"):
        return (kind, [d for d in map(_drop_constants, spec[1]) if d is not None])
    return spec if kind == "tensor" else None


def _identifier(name, taken):
    """`name` as a unique Python identifier (the traced function's input)."""
    name = re.sub(r"\W", "_", name)
    if not name or name[0].isdigit() or keyword.iskeyword(name):
        name = "input_" + name
    base, n = name, 1
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


class _Call:
    """One call's arguments, bound to the model's forward: their tensors in
    signature order (with names), and the spec that rebuilds the rest."""

    def __init__(self, model, args, kwargs):
        self.signature = inspect.signature(model.forward)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise Error(f"the inputs do not fit {type(model).__name__}.forward: {e}") from None
        # Defaults are inputs too (a tensor default is one), as in PopTorch:
        # a call that leaves out an argument and one that passes it are the
        # same model.
        passed = len(bound.arguments)
        bound.apply_defaults()
        self.arguments = list(bound.arguments)
        self.tensors, raw, taken = [], [], set()
        self.specs = []
        for name, value in bound.arguments.items():
            self.specs.append(_split(value, f"argument {name}", name, self.tensors, raw,
                                     sort_dicts=True))
        self.names = [_identifier(n, taken) for n in raw]
        parameters = list(self.signature.parameters.values())
        # The model can be traced directly when its leading parameters get a
        # tensor each; anything else is traced through a module that takes
        # the tensors and calls the model with the rest rebuilt.
        self.plain = (len(self.arguments) == passed and
                      all(s[0] == "tensor" for s in self.specs) and
                      self.arguments == [p.name for p in parameters[:len(self.arguments)]] and
                      all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                          for p in parameters[:len(self.arguments)]))

    def shape(self):
        """Where the tensors are: what the compiled model takes. Arguments
        holding none (None, numbers) are compiled in: `constants()`."""
        return tuple((n, _shape_of(s)) for n, s in zip(self.arguments, self.specs)
                     if _has_tensor(s))

    def constants(self):
        return list(zip(self.arguments, self.specs))

    def rebuild(self, leaves):
        """(args, kwargs) of the call, its tensors taken from `leaves`."""
        arguments = {n: _join(s, leaves) for n, s in zip(self.arguments, self.specs)}
        bound = inspect.BoundArguments(self.signature, arguments)
        return bound.args, bound.kwargs

    def describe(self):
        return ", ".join(self.names) if self.names else "no tensors"


def _flat_call(model, call):
    """A module whose forward takes `call`'s tensors (named as `call` names
    them, so the trace's inputs are) and returns the model's output
    tensors, flattened: what is traced when a call is more than tensors in
    the forward's leading parameters, or an output is more than tensors.
    The model's full output (constants included) is kept in `.outputs`
    after each run. The names are Python identifiers made by _identifier."""
    params = ", ".join(["self"] + call.names)
    source = (f"def forward({params}):\n"
              f"    return self._run([{', '.join(call.names)}])\n")
    namespace = {}
    exec(source, namespace)  # noqa: S102 -- identifiers made by _identifier only

    def run(self, leaves):
        args, kwargs = call.rebuild(leaves)
        self.outputs = self.model(*args, **kwargs)
        flat, _ = _flatten(self.outputs)
        return flat[0] if len(flat) == 1 else tuple(flat)

    wrapper = type("FlatCall", (torch.nn.Module,), {"forward": namespace["forward"],
                                                     "_run": run})()
    wrapper.model = model
    return wrapper


def _loss_index(flat, spec):
    """Which of a training model's output tensors is its loss: the one a
    dict (a Hugging Face ModelOutput) calls "loss", else the last output
    when it is a scalar, else the only scalar among them."""
    keyed = []

    def walk(s, key):
        if s[0] == "tensor":
            if key == "loss":
                keyed.append(s[1])
        elif s[0] == "dict":
            for k, v in s[2]:
                walk(v, k)
        elif s[0] in ("tuple", "list"):
            for v in s[1]:
                walk(v, None)

    walk(spec, None)
    scalars = [i for i, t in enumerate(flat) if t.dim() == 0 and t.is_floating_point()]
    if len(keyed) == 1 and keyed[0] in scalars:
        return keyed[0]
    if flat and flat[-1].dim() == 0:
        return len(flat) - 1
    if len(scalars) == 1:
        return scalars[0]
    raise Error("a trainingModel's model must return its loss, a scalar, as its only or last "
                "output, or as the only scalar or a dict's 'loss' (tessera.identity_loss makes "
                "one); " + (f"the last output has shape {tuple(flat[-1].shape)}" if flat
                            else "it returns no tensors"))


def _narrowed(tensor):
    """PopTorch's outputs: the IPU has no 64-bit integers, and PopTorch
    returns int64 results (argmax, arange, a sum of int64) as int32."""
    return tensor.to(torch.int32) if tensor.dtype == torch.int64 else tensor


def _as_array(value, name):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().contiguous().numpy()
    if isinstance(value, np.ndarray):
        return value
    raise Error(f"input '{name}' is a {type(value).__name__}; the model takes tensors")


# The user's module in sync with the device, as PopTorch keeps it: after a
# training call, reading the module's parameters or buffers (net.fc.weight,
# net.state_dict(), net.parameters()), calling it on the CPU or pickling it
# first copies the device's weights into it. Each of its modules' class is
# swapped for a subclass that does so (the same subclass for every instance
# of a class); destroy() swaps them back. A reference to a tensor taken
# before training sees the new values once anything above has been read:
# they are copied into the same tensors.
_SYNCED = {}  # original class -> its syncing subclass


def _sync(module):
    ref = module.__dict__.get("_tessera_executor")
    executor = ref() if ref is not None else None
    if executor is not None:
        executor._sync_host()


def _synced_class(cls):
    sub = _SYNCED.get(cls)
    if sub is not None:
        return sub

    def synced(method):
        def call(self, *args, **kwargs):
            _sync(self)
            return method(self, *args, **kwargs)
        call.__name__ = method.__name__
        call.__doc__ = method.__doc__
        return call

    def reduce_ex(self, protocol):
        # Pickled (torch.save, copy.deepcopy) as the user's own class, with
        # the device's weights and without the link to the executor.
        _sync(self)
        state = {k: v for k, v in self.__dict__.items() if k != "_tessera_executor"}
        return copyreg._reconstructor, (cls, object, None), state

    namespace = {name: synced(getattr(cls, name)) for name in (
        "__getattr__", "state_dict", "parameters", "named_parameters", "buffers",
        "named_buffers", "__call__")}
    namespace.update(__reduce_ex__=reduce_ex, __module__=cls.__module__,
                     __qualname__=cls.__qualname__, _tessera_original=cls)
    sub = _SYNCED[cls] = type(cls.__name__, (cls,), namespace)
    return sub


def _keep_in_sync(model, executor):
    ref = weakref.ref(executor)
    for module in model.modules():
        object.__setattr__(module, "_tessera_executor", ref)
        module.__class__ = _synced_class(getattr(type(module), "_tessera_original",
                                                 type(module)))


def _release(model):
    for module in model.modules():
        module.__dict__.pop("_tessera_executor", None)
        original = getattr(type(module), "_tessera_original", None)
        if original is not None:
            module.__class__ = original


class _Unsynced:
    """The model's own classes while it is traced (TorchScript records them)."""

    def __init__(self, model):
        self.model = model
        self.swapped = []

    def __enter__(self):
        for module in self.model.modules():
            original = getattr(type(module), "_tessera_original", None)
            if original is not None:
                self.swapped.append((module, module.__class__,
                                     module.__dict__.pop("_tessera_executor", None)))
                module.__class__ = original
        return self

    def __exit__(self, *exc):
        for module, cls, ref in self.swapped:
            module.__class__ = cls
            if ref is not None:
                object.__setattr__(module, "_tessera_executor", ref)


class _Executor:
    """What inference and training executors share."""

    def __init__(self, model, options, training, optimizer=None):
        if not isinstance(model, torch.nn.Module):
            raise Error(f"expected a torch.nn.Module, got {type(model).__name__}")
        if options is not None and not isinstance(options, Options):
            raise Error(f"options must be tessera.Options, got {type(options).__name__}")
        self._model = model
        self._options = options or Options()
        self._training = training
        self._optimizer = optimizer
        self._optimizer_spec = _optim.hyperparameters(optimizer) if training else None
        self._dir = tempfile.TemporaryDirectory(prefix="tessera-")
        self._path = None          # the compiled executable
        self._executable = None    # _tessera.Executable, while attached
        self._signature = None     # [(name, dtype, shape)] of one call's inputs
        self._micro_batch = None
        self._output_spec = None   # the model's output nesting (_split)
        self._call_shape = None    # the compiled call's nesting (_Call.shape)
        self._call_specs = None    # ... with its constants' values
        self._call_names = None    # its tensors' names
        self._wrapped = False      # traced through _flat_call
        self._host_stale = False   # the device's weights are newer
        self._steps_unsynced = 0   # micro-batches run since the host's copy
        self._updates = 0          # training calls run (the weights' version)
        self._trained_version = None  # inference: the updates compiled in
        if training:
            _TRAINING[model] = weakref.ref(self)
            _keep_in_sync(model, self)
        self._detached_state = None
        self.compilations = 0      # how many times the model was compiled

    # -- PopTorch's interface ------------------------------------------------

    def __call__(self, *args, **kwargs):
        call = _Call(self._model, args, kwargs)
        trainer = self._trainer()
        if trainer is not None and self._trained_version != trainer._updates:
            self._path = self._executable = None  # trained since: new weights
        if (self._path is not None and call.shape() == self._call_shape and
                call.constants() != self._call_specs):
            # The same inputs with other constants (None for a tensor, a
            # Python number) compile in: compiled again, with the weights
            # the device has.
            self.copyWeightsToHost()
            self._path = self._executable = None
        if self._path is None:
            self._compile(call, self._executable_path())
        if self._executable is None:
            self.attachToDevice()
        arrays = self._check_call(call)
        outputs = self._executable.run(arrays)
        if self._training:
            self._host_stale = True
            steps = 1
            for name, v in self._factors():
                steps *= 1 if name == "replicas" else v
            self._steps_unsynced += steps
            self._updates += 1
        return _join(self._output_spec, [_narrowed(torch.from_numpy(o)) for o in outputs])

    def compile(self, *args, **kwargs):
        """Compiles for these inputs (as the first call would) without running;
        attaches to the device unless the options name an offline target."""
        self._compile(_Call(self._model, args, kwargs), self._executable_path())
        if self._executable is None and not self._options._values["compile_only"]:
            self.attachToDevice()

    def compileAndExport(self, filename, *args, export_model=True, **kwargs):
        """Compiles for these inputs into `filename`, a .tess that
        tessera.load (or tessera-run) runs."""
        self._compile(_Call(self._model, args, kwargs), str(filename))

    def isCompiled(self):
        return self._path is not None

    def isAttached(self):
        return self._executable is not None

    isAttachedToDevice = isAttached

    @property
    def model(self):
        """The user's module (kept in sync with the device when training)."""
        return self._model

    def cycleCount(self):
        """The cycles one call takes on the IPU (PopTorch's, with
        logCycleCount): the estimate the IPU model counts."""
        if self._executable is None:
            raise Error("cycleCount: the model has not run yet")
        return self._executable.cycles

    def detachFromDevice(self):
        """Frees the device, keeping its state on the host for attachToDevice."""
        if self._executable is None:
            raise Error("the model is not attached to a device")
        self.copyWeightsToHost()
        self._detached_state = {
            s["name"]: v for s, v in zip(self._executable.state,
                                         self._executable.read_state().values())
            if s["role"] != "replica_index"}
        self._executable = None

    def attachToDevice(self):
        if self._path is None:
            raise Error("the model is not compiled yet: call it, or compile(*args), first")
        if self._executable is not None:
            raise Error("the model is already attached to a device")
        if self._options._values["compile_only"]:
            raise Error("the options ask for an offline target (useOfflineIpuTarget): "
                        "this model compiles but does not run")
        self._executable = _tessera.Executable(self._path, "ipu",
                                               instance=_instance(self._options))
        if self._detached_state is not None:
            for name, value in self._detached_state.items():
                self._executable.write_state(name, value)
            self._detached_state = None
        elif self._training:
            self._write_weights()
        if self._options.random_seed is not None:
            self._executable.set_seed(self._options.random_seed)
        if self._options.Distributed.numProcesses > 1:
            # Instances that start apart would train apart.
            self._executable.check_instances_agree()

    def destroy(self):
        """Frees the device and the executable; the module's weights are the
        device's and it is the user's own again (no longer kept in sync)."""
        self._sync_host()
        self._executable = None
        self._path = None
        self._signature = self._call_shape = self._call_specs = None
        self._detached_state = None
        if self._training:
            _release(self._model)
        # Called again, it compiles again (PopTorch's executor does).
        self._dir.cleanup()
        self._dir = tempfile.TemporaryDirectory(prefix="tessera-")

    def copyWeightsToHost(self):
        """Copies the device's weights and buffers into the model."""
        if self._executable is None or not self._training:
            return
        state = self._model.state_dict()
        with torch.no_grad():
            for name, value in self._executable.trained_weights():
                key = self._state_key(name)
                if key in state:
                    state[key].copy_(torch.from_numpy(value))
            # Batch norm's step counter is PyTorch's bookkeeping, not device
            # state: it counts the micro-batches the device ran.
            for module in self._model.modules():
                tracked = getattr(module, "num_batches_tracked", None)
                if isinstance(tracked, torch.Tensor):
                    tracked += self._steps_unsynced
        self._steps_unsynced = 0
        self._host_stale = False

    def copyWeightsToDevice(self):
        """Copies the model's weights to the device (an inference model's
        weights are compiled in: it is compiled again on its next call)."""
        if not self._training:
            self._path = None
            self._executable = None
            return
        if self._executable is not None:
            self._write_weights()
            self._host_stale = False

    # The model's attributes, with its weights brought up to date first.

    def parameters(self, *args, **kwargs):
        self._sync_host()
        return self._model.parameters(*args, **kwargs)

    def named_parameters(self, *args, **kwargs):
        self._sync_host()
        return self._model.named_parameters(*args, **kwargs)

    def state_dict(self, *args, **kwargs):
        self._sync_host()
        return self._model.state_dict(*args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._model, name)

    def __repr__(self):
        kind = "trainingModel" if self._training else "inferenceModel"
        return f"tessera.{kind}({self._model.__class__.__name__})"

    # -- Internals -------------------------------------------------------------

    def _trainer(self):
        """The training executor of this inference model's module, if any."""
        if self._training or self._model not in _TRAINING:
            return None
        return _TRAINING[self._model]()

    def _executable_path(self):
        return os.path.join(self._dir.name, "model.tess")

    def _sync_host(self):
        if self._host_stale and self._executable is not None:
            self._host_stale = False  # copyWeightsToHost reads the module
            self.copyWeightsToHost()

    def _state_key(self, name):
        name = name[len("self."):] if name.startswith("self.") else name
        if self._wrapped and name.startswith("model."):
            name = name[len("model."):]  # traced through _flat_call
        return name

    def _factors(self):
        """The host batch's factors past the micro-batch, as (name, value)."""
        factors = []
        if self._training:
            factors.append(("gradient accumulation",
                            self._options._values["gradient_accumulation"]))
        factors.append(("device iterations", self._options.device_iterations))
        factors.append(("replicas", self._options.replication_factor))
        return factors

    def _describe_batch(self):
        parts = [f"micro-batch {self._micro_batch}"] + [f"{n} {v}" for n, v in self._factors()]
        total = self._micro_batch
        for _, v in self._factors():
            total *= v
        return " x ".join(parts) + f" = {total} samples"

    def _combined(self):
        combined = 1
        for _, v in self._factors():
            combined *= v
        return combined

    def _compile(self, call, path):
        if self._training and "_tessera_executor" not in self._model.__dict__:
            _keep_in_sync(self._model, self)  # trained again after destroy()
        trainer = self._trainer()
        if trainer is not None:
            trainer.copyWeightsToHost()
            self._trained_version = trainer._updates
        arrays = [_as_array(a, n) for a, n in zip(call.tensors, call.names)]
        combined = self._combined()
        factors = " x ".join(f"{n} {v}" for n, v in self._factors())
        # Each input's dimension 0 holds `combined` micro-batches of its own
        # (PopTorch divides each input's batch); one micro-batch a call, the
        # inputs are taken whole.
        for name, a in zip(call.names, arrays):
            if combined == 1:
                continue
            if a.ndim == 0:
                raise Error(f"input '{name}' is a 0-d tensor: with {factors} = {combined} "
                            "every input needs a batch dimension to split")
            if a.shape[0] % combined or a.shape[0] == 0:
                raise Error(f"input '{name}' has {a.shape[0]} samples in dimension 0, not a "
                            f"positive multiple of {factors} = {combined}")
        example = tuple(torch.from_numpy((a[:a.shape[0] // combined] if a.ndim else a).copy())
                        for a in arrays)
        batched = [e for e in example if e.dim() > 0]
        micro = batched[0].shape[0] if batched else 1
        model = self._model
        was_training = model.training
        model.train(self._training)
        # Tracing runs the model: keep its buffers (running statistics) as
        # they were. The traced module shares the tensors, so restoring
        # them restores what is saved.
        saved = _cloned_state(model)
        for hook in list(_PRE_COMPILE_HOOKS.values()):
            hook()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", torch.jit.TracerWarning)
                with _blocks._Tracing(self._options._strategy) as placed, _Unsynced(model):
                    traced, outputs, self._wrapped = _trace(model, example, call)
            torch_dir = os.path.dirname(torch.__file__)
            for w in caught:
                # Warnings from inside torch are about its own checks, not the
                # model's data-dependent Python.
                if (issubclass(w.category, torch.jit.TracerWarning) and
                        not w.filename.startswith(torch_dir)):
                    warnings.warn(f"tracing {model.__class__.__name__}: {w.message} "
                                  f"({w.filename}:{w.lineno}); the compiled model keeps "
                                  "what this trace saw", stacklevel=3)
        finally:
            with torch.no_grad():
                model.load_state_dict(saved)
            model.train(was_training)
        pt = os.path.join(self._dir.name, "model.pt")
        traced.save(pt)
        names = [re.sub(r"\.\d+$", "", i.debugName()) for i in traced.graph.inputs()][1:]
        flat, output_spec = _flatten(outputs)
        options = self._options._compile_options(self._training)
        rules = _blocks.block_rules(model, self._options._strategy)
        if (rules or placed.ipus) and "layers_per_ipu" in options:
            raise Error("the model has BeginBlocks or Blocks and the options an IPUConfig's "
                        "layers_per_ipu: place its layers one way (remove the blocks, "
                        "or build the options without layers_per_ipu)")
        if placed.ipus:
            options["num_ipus"] = max(options.get("num_ipus", 1), 1 + max(placed.ipus))
        if rules:
            # Op names are the traced module's paths: the keyword wrapper
            # adds its own prefix.
            prefix = "model." if self._wrapped else ""
            options["blocks"] = [prefix + r for r in rules]
            ipus = 1 + max(int(r.split("=")[1].split(":")[0]) for r in rules)
            options["num_ipus"] = max(options.get("num_ipus", 1), ipus)
        options["input_shapes"] = {n: list(e.shape) for n, e in zip(names, example)}
        options["input_types"] = {n: _INPUT_TYPES[e.dtype] for n, e in zip(names, example)
                                  if e.dtype != torch.float32}
        if self._training:
            index = _loss_index(flat, output_spec)
            options["train"] = True
            options["loss"] = "output:" + ("output" if len(flat) == 1 else f"output_{index}")
            options["optimizer"] = _optim.spec(self._optimizer)
            scale = getattr(self._optimizer, "loss_scaling", None)
            if scale not in (None, 1, 1.0) and "loss_scaling" not in options:
                options["loss_scaling"] = repr(float(scale))
        _tessera.compile(pt, str(path), options)
        for hook in list(_POST_COMPILE_HOOKS.values()):
            hook()
        self.compilations += 1
        self._signature = [(n, e.dtype, tuple(e.shape)) for n, e in zip(names, example)]
        self._micro_batch = micro
        self._output_spec = output_spec
        self._call_shape, self._call_specs = call.shape(), call.constants()
        self._call_names = call.names
        if str(path) == self._executable_path():
            self._path = str(path)

    def _check_call(self, call):
        if call.shape() != self._call_shape:
            missing = [n for n in self._call_names if n not in call.names]
            extra = [n for n in call.names if n not in self._call_names]
            detail = "".join([f" Missing arguments: {', '.join(missing)}." if missing else "",
                              f" Unexpected arguments: {', '.join(extra)}." if extra else ""])
            raise Error(f"the model was compiled for the inputs {', '.join(self._call_names)}; "
                        f"got {call.describe()} (another executor of the model compiles "
                        f"for these).{detail}")
        arrays = []
        combined = self._combined()
        for t, (name, dtype, compiled) in zip(call.tensors, self._signature):
            a = _as_array(t, name)
            got = t.dtype if isinstance(t, torch.Tensor) else torch.from_numpy(a[:0]).dtype
            if got != dtype:
                raise Error(f"input '{name}': expected {dtype} but got {got} (the type the "
                            "model was compiled for; destroy() it to compile for another)")
            expected = list(compiled)
            if expected and combined > 1:
                expected[0] *= combined
            if list(a.shape) != expected:
                raise Error(f"input '{name}': expected torch.Size({expected}) but got "
                            f"torch.Size({list(a.shape)}): the model was compiled for "
                            f"{self._describe_batch()} per call")
            arrays.append(a)
        return arrays

    def _write_weights(self):
        state = self._model.state_dict()
        names = {s["name"] for s in self._executable.state if s["role"] in ("parameter",
                                                                               "buffer")}
        for name in names:
            key = self._state_key(name)
            if key in state:
                self._executable.write_state(name, state[key].detach().cpu().numpy())


class InferenceExecutor(_Executor):
    pass


class TrainingExecutor(_Executor):
    def setOptimizer(self, optimizer):
        """Changes the optimizer's hyperparameters on the device, without a
        recompile. Its type and the terms compiled into the update (momentum
        from none to some, nesterov, amsgrad, ...) must stay as compiled."""
        name, values = _optim.hyperparameters(optimizer)
        compiled_name, compiled = self._optimizer_spec
        if name != compiled_name:
            raise Error(f"setOptimizer: the model was compiled with {compiled_name}, not "
                        f"{name}; a different optimizer needs a new trainingModel")
        types, compiled_types = (_optim.accumulator_types(optimizer),
                                 _optim.accumulator_types(self._optimizer))
        if types != compiled_types:
            raise Error(f"setOptimizer: accumulator types {compiled_types or 'default'} -> "
                        f"{types or 'default'} change the compiled update; create a new "
                        "trainingModel for them")
        if self._executable is None and self._path is None:
            self._optimizer, self._optimizer_spec = optimizer, (name, values)
            return
        if self._executable is None:
            self.attachToDevice()
        runtime = {s["name"] for s in self._executable.state if s["role"] == "hyperparameter"}
        for key, value in values.items():
            if f"optimizer.{key}" in runtime:
                self._executable.write_state(f"optimizer.{key}",
                                             np.array(value, dtype=np.float32))
            elif value != compiled.get(key, 0.0):
                raise Error(f"setOptimizer: {key} {compiled.get(key, 0.0)} -> {value} changes "
                            "the compiled update (a term added or removed); create a new "
                            "trainingModel for it")
        self._optimizer, self._optimizer_spec = optimizer, (name, values)


def inferenceModel(model, options=None):
    """`model` compiled for inference on its first call (PopTorch's
    poptorch.inferenceModel). Output mode All by default."""
    return InferenceExecutor(model, options, training=False)


def trainingModel(model, options=None, optimizer=None):
    """`model` compiled as a training step on its first call (PopTorch's
    poptorch.trainingModel). The model returns its loss, a scalar, as its only
    or last output; the optimizer defaults to SGD with learning rate 0.01;
    output mode Final by default."""
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise Error(f"optimizer must be a torch.optim optimizer, got {type(optimizer).__name__}")
    return TrainingExecutor(model, options, training=True, optimizer=optimizer)


def _cloned_state(model):
    """A copy of `model`'s state dict that load_state_dict takes back,
    with its version metadata (torchvision's MNASNet refuses a state dict
    without it)."""
    state = model.state_dict()
    cloned = type(state)((k, v.clone()) for k, v in state.items())
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        cloned._metadata = metadata
    return cloned


# PopTorch's compile hooks: called, in the order registered, before each
# compile (before the model is traced) and after it.
_PRE_COMPILE_HOOKS = collections.OrderedDict()
_POST_COMPILE_HOOKS = collections.OrderedDict()


def _register_hook(hooks, hook, when):
    if not callable(hook):
        raise Error(f"{when}-compile hook must be callable, got {type(hook).__name__}")
    handle = torch.utils.hooks.RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def registerPreCompileHook(hook):
    """Calls `hook()` before every model compile (PopTorch's); returns a
    handle whose remove() unregisters it."""
    return _register_hook(_PRE_COMPILE_HOOKS, hook, "Pre")


def registerPostCompileHook(hook):
    """Calls `hook()` after every model compile (PopTorch's); returns a
    handle whose remove() unregisters it."""
    return _register_hook(_POST_COMPILE_HOOKS, hook, "Post")


def _instance(options):
    """(process id, processes) when the options make this process one of
    tessera-launch's instances: its executables run its share of the
    replicas, and an uncaught exception stops the launch."""
    count = options.Distributed.numProcesses
    if count <= 1:
        return None
    from . import distributed
    distributed._guard()
    return (options.Distributed.processId, count)


class LoadedExecutable:
    """A .tess from compileAndExport (or tessera-compile), run on the IPU
    model: tensors in, tensors out."""

    def __init__(self, filename):
        # A .tess holds native code this process runs, as a shared library
        # would: say so when someone else could have written it.
        why = _tessera.why_untrusted(str(filename))
        if why:
            warnings.warn(f"{filename}: {why}; a .tess is native code that runs as you: "
                          "load only executables you or a cache of your own produced",
                          stacklevel=2)
        self._executable = _tessera.Executable(str(filename), "ipu", instance=_instance(Options()))

    def __call__(self, *args):
        arrays = [_as_array(a, i) for i, a in enumerate(args)]
        outputs = tuple(torch.from_numpy(o) for o in self._executable.run(arrays))
        return outputs[0] if len(outputs) == 1 else outputs

    @property
    def inputs(self):
        return self._executable.inputs

    @property
    def outputs(self):
        return self._executable.outputs

    def state_dict(self):
        """The trained weights and buffers, by the model's names."""
        return {(n[len("self."):] if n.startswith("self.") else n): torch.from_numpy(v)
                for n, v in self._executable.trained_weights()}

    @property
    def cycles(self):
        """Estimated ipu cycles per call."""
        return self._executable.cycles


def load(filename):
    return LoadedExecutable(filename)
