"""PyTorch glue: a Sluice job as a ``torch.utils.data.IterableDataset``.

    import torch, sluice.torch
    ds = sluice.torch.IterableDataset("10.0.0.5:7400", "train.json", data_root="/data")
    for images, labels in torch.utils.data.DataLoader(ds, batch_size=None):
        ...

Items are whole batches (Sluice batches itself), so give DataLoader
``batch_size=None``. Use ``num_workers=0``: Sluice runs its own threads and
remote workers; DataLoader worker processes would each run the whole job.
Tensors share memory with the library's batch (torch.from_numpy), no copy.
"""

import numpy as np
import torch
import torch.utils.data

from . import Loader

__all__ = ["IterableDataset"]


class IterableDataset(torch.utils.data.IterableDataset):
    """Yields ``(images, labels)``: images a tensor [n, c, h, w] / [n, h, w, c]
    (a list of tensors when samples differ in shape), labels int64 [n].

    Every ``iter()`` opens a new job that runs all of the spec's epochs (or
    ``epochs=``), so a training loop iterates it once; an outer per-epoch
    loop wants ``epochs=1``. Keyword arguments go to ``sluice.Loader``."""

    def __init__(self, dispatcher, spec, **loader_kwargs):
        super().__init__()
        self.dispatcher = dispatcher
        self.spec = spec
        self.loader_kwargs = loader_kwargs

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is not None and info.num_workers > 1:
            raise RuntimeError(
                "sluice.torch.IterableDataset: use DataLoader(num_workers=0 or 1); "
                "each worker process would run the whole job")
        loader = Loader(self.dispatcher, self.spec, **self.loader_kwargs)
        try:
            for images, labels in loader:
                if isinstance(images, np.ndarray):
                    x = torch.from_numpy(images)
                else:
                    x = [torch.from_numpy(a) for a in images]
                yield x, torch.from_numpy(labels.astype(np.int64))
        finally:
            loader.close()
