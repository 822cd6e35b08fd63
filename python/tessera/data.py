"""PopTorch's DataLoader: each batch is one host call's worth of samples."""
import torch

from ._errors import Error
from .options import Options


class DataLoader(torch.utils.data.DataLoader):
    """A torch DataLoader whose batches hold PopTorch's combined batch:
    batch_size x device iterations x replication factor x gradient
    accumulation samples, so each batch is one call of the model compiled
    with `options`. Incomplete last batches are dropped by default, as
    PopTorch does (a model compiled for one batch size takes no other)."""

    def __init__(self, options, dataset, batch_size=1, shuffle=False, num_workers=0,
                 drop_last=True, **kwargs):
        if not isinstance(options, Options):
            raise Error(f"DataLoader's first argument is tessera.Options, got "
                        f"{type(options).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise Error(f"batch_size must be a positive integer, got {batch_size!r}")
        self.options = options
        self.batch_size_per_step = batch_size
        self.combinedBatchSize = (batch_size * options.device_iterations *
                                  options.replication_factor *
                                  options.Training.gradient_accumulation)
        super().__init__(dataset, batch_size=self.combinedBatchSize, shuffle=shuffle,
                         num_workers=num_workers, drop_last=drop_last, **kwargs)
