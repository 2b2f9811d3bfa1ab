"""PyTorch glue: a Sluice job as a ``torch.utils.data.IterableDataset``.

    import torch, sluice.torch
    ds = sluice.torch.IterableDataset("10.0.0.5:7400", "train.json", data_root="/data")
    for images, labels in torch.utils.data.DataLoader(ds, batch_size=None):
        ...

Items are whole batches (Sluice batches itself), so give DataLoader
``batch_size=None``: with a batch size (DataLoader's default is 1) it would
stack Sluice's batches into one tensor, which is refused with a message
saying so. Use ``num_workers=0``: Sluice runs its own threads and remote
workers; DataLoader worker processes would each run the whole job.
Tensors share memory with the library's batch (torch.from_numpy), no copy.

Epochs, either way:

- one job of N epochs: ``IterableDataset(..., epochs=N)`` (or the spec's
  ``epochs``), iterated once;
- an outer loop, one job per epoch::

      ds = sluice.torch.IterableDataset(disp, spec, data_root=root, epochs=1)
      for epoch in range(N):
          ds.set_epoch(epoch)
          for images, labels in DataLoader(ds, batch_size=None):
              ...

  Epoch e then has the order and the random crops of epoch e of one N-epoch
  job. Without set_epoch each iteration goes on where the last one's job
  ended (epochs 0, 1, 2, ... of this dataset object), so the loop reshuffles
  either way; set_epoch pins it (after a restart from a checkpoint, too).

``stats()``, ``skipped()`` and ``skipped_samples()`` report the current or
last job (in this process: not with DataLoader worker processes).
"""

import numpy as np
import torch
import torch.utils.data

from . import Loader, SluiceError

__all__ = ["IterableDataset"]

_NO_BATCH_SIZE = (
    "sluice.torch.IterableDataset yields whole batches (Sluice batches by itself): "
    "give DataLoader batch_size=None, e.g. DataLoader(ds, batch_size=None); a DataLoader "
    "batch size would stack several of its batches into one tensor")


class _Item(tuple):
    """One (images, labels) item. A tuple of its own type so that DataLoader
    collating several of them (a batch_size other than None) is refused
    with _NO_BATCH_SIZE instead of torch's "stack expects each tensor to be
    equal size" (or, with equal sizes, a silent extra dimension)."""

    __slots__ = ()


def _refuse_collate(batch, *, collate_fn_map=None):
    raise TypeError(_NO_BATCH_SIZE)


try:  # torch >= 1.13: default_collate looks item types up in this table
    from torch.utils.data._utils.collate import default_collate_fn_map

    default_collate_fn_map[_Item] = _refuse_collate
except ImportError:
    pass


class IterableDataset(torch.utils.data.IterableDataset):
    """Yields ``(images, labels)``: images a tensor [n, c, h, w] / [n, h, w, c]
    (a list of tensors when samples differ in shape), labels int64 [n].

    Every ``iter()`` opens a new job over ``epochs`` epochs (keyword
    arguments go to ``sluice.Loader``, e.g. ``epochs``, ``seed``, ``offload``)
    numbered from ``set_epoch``'s epoch, or else from where the previous
    iteration's job ended."""

    def __init__(self, dispatcher, spec, **loader_kwargs):
        super().__init__()
        if "first_epoch" in loader_kwargs:
            raise TypeError("sluice.torch.IterableDataset: use set_epoch(), not first_epoch=")
        self.dispatcher = dispatcher
        self.spec = spec
        self.loader_kwargs = loader_kwargs
        self.epoch = 0  # the next job's first epoch
        self._loader = None

    def set_epoch(self, epoch):
        """The next iteration's job starts at this epoch (0-based), as
        torch.utils.data.DistributedSampler.set_epoch."""
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise ValueError("set_epoch: %r is not an epoch number (an int >= 0)" % (epoch,))
        self.epoch = int(epoch)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is not None and info.num_workers > 1:
            raise RuntimeError(
                "sluice.torch.IterableDataset: use DataLoader(num_workers=0 or 1); "
                "each worker process would run the whole job")
        loader = Loader(self.dispatcher, self.spec, first_epoch=self.epoch,
                        **self.loader_kwargs)
        self._loader = loader
        st = loader.stats()
        self.epoch = st["first_epoch"] + st["epochs"]  # also after a break
        try:
            for images, labels in loader:
                if isinstance(images, np.ndarray):
                    x = torch.from_numpy(images)
                else:
                    x = [torch.from_numpy(a) for a in images]
                yield _Item((x, torch.from_numpy(labels.astype(np.int64))))
        finally:
            loader.close()

    def __getstate__(self):
        # DataLoader worker processes started by spawn pickle the dataset:
        # the last job's handle stays here.
        state = self.__dict__.copy()
        state["_loader"] = None
        return state

    def _last(self):
        if self._loader is None:
            raise SluiceError("sluice.torch.IterableDataset: no job yet (iterate it first)")
        return self._loader

    def stats(self):
        """sluice.Loader.stats() of the current or last job."""
        return self._last().stats()

    def skipped(self):
        """Skipped samples by reason of the current or last job."""
        return self._last().skipped()

    def skipped_samples(self):
        """The most recent skipped samples of the current or last job."""
        return self._last().skipped_samples()
