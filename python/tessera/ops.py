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


def _check_size(size, name):
    """PopTorch's messages for a slice of no elements or fewer."""
    if isinstance(size, bool) or not isinstance(size, int):
        raise Error(f"{name}: size must be an integer, got {size!r}")
    if size == 0:
        raise Error(f"{name}: The start and end of a slice must be different.")
    if size < 0:
        raise Error(f"{name}: Taking a slice of a tensor with the end less than the start is "
                    "not supported.")


def _dynamic_start(start, name):
    if not isinstance(start, torch.Tensor) or start.numel() != 1 or start.is_floating_point():
        raise Error(f"{name}: start must be an integer tensor of one element, got {start!r}")
    return start.reshape(1).to(torch.int64)


def dynamic_slice(tensor, dim, start, size, step):
    """`size` elements of `tensor` along `dim` from `start`, a tensor the
    device computes, every `step`-th (PopTorch's dynamic_slice): a gather at
    start + (0, step, 2 step, ...), the indices kept inside the dimension."""
    start = _dynamic_start(start, "dynamic_slice")
    _check_size(size, "dynamic_slice")
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise Error(f"dynamic_slice: step must be a positive integer, got {step!r}")
    n = tensor.shape[dim]
    offsets = torch.tensor(list(range(0, size, step)), dtype=torch.int64)
    index = torch.clamp(start + offsets, 0, n - 1)
    return torch.index_select(tensor, dim, index)


def dynamic_update(input, src, dim, start, size):
    """`input` with `src` written along `dim` from `start`, a tensor the
    device computes (PopTorch's dynamic_update): each position of the
    dimension takes `src`'s element at (position - start) where that is in
    [0, size), else keeps `input`'s."""
    start = _dynamic_start(start, "dynamic_update")
    _check_size(size, "dynamic_update")
    if input.dim() != src.dim():
        raise Error("dynamic_update: input and src tensors must have same dimensionality. "
                    f"({input.dim()}) vs ({src.dim()})")
    if input.dtype != src.dtype:
        raise Error("dynamic_update: input and src tensor must have same dtype. "
                    f"({input.dtype} vs {src.dtype})")
    if src.shape[dim] != size:
        raise Error(f"dynamic_update: src has {src.shape[dim]} elements along dim {dim}, "
                    f"not size {size}")
    n = input.shape[dim]
    positions = torch.tensor(list(range(n)), dtype=torch.int64)
    inside = torch.logical_and(positions >= start, positions < start + size)
    taken = torch.index_select(src, dim, torch.clamp(positions - start, 0, size - 1))
    shape = [1] * input.dim()
    shape[dim] = n
    return torch.where(inside.reshape(shape), taken, input)
