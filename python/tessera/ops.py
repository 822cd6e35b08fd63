"""PopTorch's functions for use inside a model's forward: what runs while
the model is traced for the IPU (isRunningOnIpu), loops (for_loop), and
the hints that have no effect on the results (nop, set_available_memory,
ipu_print_tensor)."""
import warnings

import torch

from . import blocks as _blocks
from ._errors import Error


def isRunningOnIpu():
    """True while the model is traced to be compiled for the IPU, False when
    it runs on the CPU (PopTorch's): `if poptorch.isRunningOnIpu():` picks
    the IPU's code path."""
    return _blocks._Tracing.current is not None


def for_loop(count, body, inputs):
    """`body` applied `count` times, each time to the previous results
    (PopTorch's for_loop): the loop is unrolled when traced, with the same
    results. `inputs` is a list of tensors; so is the result."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise Error(f"for_loop: count must be a non-negative integer, got {count!r}")
    if not isinstance(inputs, (list, tuple)) or not all(isinstance(t, torch.Tensor)
                                                        for t in inputs):
        raise Error("for_loop: inputs must be a list of tensors")
    values = list(inputs)
    for _ in range(count):
        out = body(*values)
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        if len(out) != len(values):
            raise Error(f"for_loop: the body returns {len(out)} tensors for {len(values)} "
                        "inputs; it must return one per input")
        values = out
    return values


def nop(tensor):
    """`tensor` itself (PopTorch's nop, a barrier to its optimizations)."""
    return tensor


_warned = set()


def _warn_once(what, why):
    if what not in _warned:
        _warned.add(what)
        warnings.warn(f"{what}: {why}", stacklevel=3)


def set_available_memory(tensor, available_memory_proportion):
    """PopTorch's per-op memory hint. Tessera plans with one proportion for
    the whole model (Options.setAvailableMemoryProportion): the op keeps
    that one (a warning says so once); the results are the same."""
    if not 0 < float(available_memory_proportion) <= 1:
        raise Error("set_available_memory: the proportion must be in (0, 1], got "
                    f"{available_memory_proportion!r}")
    _warn_once("set_available_memory", "Tessera applies one available memory proportion to "
               "every op (Options.setAvailableMemoryProportion); this op's is not applied")
    return tensor


def ipu_print_tensor(tensor, title=""):
    """PopTorch prints `tensor` from the device as the program runs; the
    IPU model does not (a warning says so once). Returns `tensor`."""
    _warn_once("ipu_print_tensor", "the IPU model does not print tensors while it runs; "
               "return the tensor as an output to see it")
    return tensor


def serializedMatMul(lhs, rhs, mode, factor=0, keep_precision=False):
    """torch.matmul(lhs, rhs) (PopTorch's serializedMatMul): PopTorch splits
    it into `factor` pieces to save memory; Tessera's planner chooses serial
    steps itself when memory is short (ipu-plan-tiles), so the hint is not
    needed: the result is the product."""
    from .enums import MatMulSerializationMode
    if not isinstance(mode, MatMulSerializationMode):
        raise Error(f"serializedMatMul: mode must be a MatMulSerializationMode, got {mode!r}")
    if mode != MatMulSerializationMode.Disabled and (
            isinstance(factor, bool) or not isinstance(factor, int) or factor < 1):
        raise Error(f"serializedMatMul: factor must be a positive integer, got {factor!r}")
    return torch.matmul(lhs, rhs)
