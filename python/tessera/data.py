"""PopTorch's DataLoader: each batch is one host call's worth of samples;
and its asynchronous loading (DataLoaderMode.Async, AsynchronousDataAccessor)."""
import enum
import queue
import threading

import torch

from ._errors import Error
from .options import Options


class DataLoaderMode(enum.IntEnum):
    """How a DataLoader loads (PopTorch's): in the caller's thread (Sync) or
    ahead of it on a background thread (Async; AsyncRebatched also
    rebatches its workers' batches, which loading ahead gives here too)."""
    Sync = 0
    Async = 1
    AsyncRebatched = 2


class DataLoader(torch.utils.data.DataLoader):
    """A torch DataLoader whose batches hold PopTorch's combined batch:
    batch_size x device iterations x replication factor x gradient
    accumulation samples, so each batch is one call of the model compiled
    with `options`. Incomplete last batches are dropped by default, as
    PopTorch does (a model compiled for one batch size takes no other).
    With `mode` Async or AsyncRebatched, batches are loaded ahead on a
    background thread (`async_options` are AsynchronousDataAccessor's)."""

    def __init__(self, options, dataset, batch_size=1, shuffle=False, num_workers=0,
                 drop_last=True, persistent_workers=None, auto_distributed_partitioning=True,
                 mode=DataLoaderMode.Sync, async_options=None, rebatched_worker_size=None,
                 **kwargs):
        if not isinstance(options, Options):
            raise Error(f"DataLoader's first argument is tessera.Options, got "
                        f"{type(options).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise Error(f"batch_size must be a positive integer, got {batch_size!r}")
        try:
            self._mode = DataLoaderMode(mode)
        except ValueError:
            raise Error(f"mode must be a DataLoaderMode, got {mode!r}") from None
        self.options = options
        self.batch_size_per_step = batch_size
        self.combinedBatchSize = (batch_size * options.device_iterations *
                                  options.replication_factor *
                                  options.Training.gradient_accumulation)
        self._async_options = dict(async_options or {})
        if persistent_workers is None:
            persistent_workers = num_workers > 0
        processes = options.Distributed.numProcesses
        if processes > 1 and auto_distributed_partitioning and \
                not isinstance(dataset, torch.utils.data.IterableDataset):
            # One of tessera-launch's instances: its replicas' rows of each
            # combined batch of the whole launch, in one process's order
            # (PopTorch gives each process a block of the data set instead;
            # this way the launch trains as one process with every replica).
            if "sampler" in kwargs or "batch_sampler" in kwargs:
                raise Error("DataLoader: a sampler of your own and several processes: pass "
                            "auto_distributed_partitioning=False and shard it yourself")
            if shuffle:
                # Drawn as one process draws it (torch's generator, or the
                # one given): every instance must seed it alike.
                order = torch.utils.data.RandomSampler(dataset,
                                                       generator=kwargs.pop("generator", None))
            else:
                order = torch.utils.data.SequentialSampler(dataset)
            from .distributed import InstanceSampler
            local = options.replication_factor
            sampler = InstanceSampler(
                order, batch_size,
                options.device_iterations * options.Training.gradient_accumulation,
                local * processes, options.Distributed.processId * local, local, drop_last)
            super().__init__(dataset, batch_sampler=sampler, num_workers=num_workers,
                             persistent_workers=persistent_workers, **kwargs)
            return
        super().__init__(dataset, batch_size=self.combinedBatchSize, shuffle=shuffle,
                         num_workers=num_workers, drop_last=drop_last,
                         persistent_workers=persistent_workers, **kwargs)

    def __iter__(self):
        if self._mode == DataLoaderMode.Sync:
            return super().__iter__()
        return iter(AsynchronousDataAccessor(_Synchronous(self), **self._async_options))

    def terminate(self):
        """Stops loading ahead (Async modes; PopTorch's)."""


class _Synchronous:
    """A DataLoader iterated as a plain one (what an Async loader's
    background thread reads)."""

    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        return torch.utils.data.DataLoader.__iter__(self.loader)

    def __len__(self):
        return len(self.loader)


_END = object()


class AsynchronousDataAccessor:
    """Loads the batches of `dataset` (an iterable, usually a DataLoader)
    ahead of the caller on a background thread, up to `buffer_size` of
    them, in the same order (PopTorch's AsynchronousDataAccessor). With
    `load_indefinitely` (the default) each `iter()` starts the next epoch;
    `terminate()` stops the thread."""

    def __init__(self, dataset, buffer_size=3, miss_sleep_time_in_ms=0.1,
                 load_indefinitely=True, early_preload=False, sharing_strategy=None,
                 rebatched_size=None):
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
            raise Error(f"buffer_size must be a positive integer, got {buffer_size!r}")
        self._dataset = dataset
        self._buffer_size = buffer_size
        self._thread = None
        self._queue = None
        self._stop = threading.Event()
        self.load_indefinitely = load_indefinitely
        if early_preload:
            self._start()

    def __len__(self):
        return len(self._dataset)

    def _start(self):
        self._stop.clear()
        self._queue = queue.Queue(self._buffer_size)

        def load(q=self._queue, stop=self._stop):
            try:
                for batch in self._dataset:
                    while not stop.is_set():
                        try:
                            q.put(batch, timeout=0.1)
                            break
                        except queue.Full:
                            continue
                    if stop.is_set():
                        return
                q.put(_END)
            except BaseException as e:  # raised again in the caller
                q.put(e)

        self._thread = threading.Thread(target=load, name="tessera-data", daemon=True)
        self._thread.start()

    def __iter__(self):
        if self._thread is None:
            self._start()
        try:
            while True:
                item = self._queue.get()
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            # An epoch ended or left early: the thread stops either way.
            self._stop.set()
            self._thread.join(timeout=5)
            self._thread = None

    def terminate(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __del__(self):
        self._stop.set()
