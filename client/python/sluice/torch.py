"""PyTorch glue: a Sluice job as a ``torch.utils.data.IterableDataset``.

    import torch, sluice.torch
    ds = sluice.torch.IterableDataset("10.0.0.5:7400", "train.json", data_root="/data",
                                      device="cuda")
    for images, labels in torch.utils.data.DataLoader(ds, batch_size=None):
        ...

Items are whole batches (Sluice batches itself), so give DataLoader
``batch_size=None``: with a batch size (DataLoader's default is 1) it would
stack Sluice's batches into one tensor, which is refused with a message
saying so. Use ``num_workers=0``: Sluice runs its own threads and remote
workers; DataLoader worker processes would each run the whole job.

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

Checkpoints (torchdata's ``StatefulDataLoader`` protocol: ``state_dict()`` /
``load_state_dict()``): save ``ds.state_dict()`` with the model at a step
boundary, on every rank, and after a restart call ``ds.load_state_dict(sd)``
before iterating: the next iteration delivers exactly the samples the saved
run had not consumed, with the same bytes, then the later epochs. Under
``torch.distributed`` every rank's state_dict holds the states of all ranks
(gathered), so any one rank's checkpoint resumes the job on any number of
ranks. A few KB per rank.

``stats()``, ``skipped()`` and ``skipped_samples()`` report the current or
last job (in this process: not with DataLoader worker processes).

Without ``device``, tensors share memory with the library's batch
(torch.from_numpy), no copy. A spec whose normalize has ``"on": "device"``
delivers uint8 images (a quarter of float32's bytes on the wire and no
normalize on any CPU); this dataset applies the normalization on ``device``
after the batch is there, in one op (``torch.addcmul(shift, x, scale)``:
uint8 in, float32 out, scale = 1 / (255 std) and shift = -mean / std rounded
once from float64). The result is within a few float32 ulps of the CPU
normalize ((x / 255 - mean) / std), not bit-identical to it; digests
(``sluice run --digests``) are of the uint8 tensors Sluice produces.
"""

import numpy as np
import torch
import torch.utils.data

from . import Loader, RecordBatch, SluiceError, describe, shared_job_secret

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


_LAYOUT_CHW = 1


class _DeviceNormalize:
    """The normalization of a uint8 batch as one op on its device. The
    constants are made once per (mean, std, layout, channels, device)."""

    def __init__(self):
        self._consts = {}

    def _get(self, norm, layout, c, device, flat):
        key = (norm, layout, c, str(device), flat)
        got = self._consts.get(key)
        if got is None:
            mean = np.asarray(norm[0][:c], np.float64)
            std = np.asarray(norm[1][:c], np.float64)
            scale = torch.from_numpy((1.0 / (255.0 * std)).astype(np.float32))
            shift = torch.from_numpy((-mean / std).astype(np.float32))
            # Broadcast along the channel axis: [n, c, h, w] or [n, h, w, c]
            # for a uniform batch; [c, -1] or [-1, c] for one flat sample.
            if flat:
                shape = (c, 1) if layout == _LAYOUT_CHW else (1, c)
            else:
                shape = (1, c, 1, 1) if layout == _LAYOUT_CHW else (1, 1, 1, c)
            got = (shift.view(shape).to(device), scale.view(shape).to(device))
            self._consts[key] = got
        return got

    def batch(self, x, norm, layout):
        c = x.shape[1] if layout == _LAYOUT_CHW else x.shape[3]
        shift, scale = self._get(norm, layout, c, x.device, False)
        return torch.addcmul(shift, x, scale)

    def sample(self, x, norm, layout):
        # A flat sample of a non-uniform batch: decoded images are RGB.
        shift, scale = self._get(norm, layout, 3, x.device, True)
        grid = x.view(3, -1) if layout == _LAYOUT_CHW else x.view(-1, 3)
        return torch.addcmul(shift, grid, scale).view(-1)


def _erase(img, e, layout):
    """A random_erasing after the device normalize, in place on one
    normalized image [c, h, w] / [h, w, c]: torchvision's F.erase there, at
    the box Sluice drew (Batch.erase). "random" fills standard normal values
    from a generator seeded by the box's seed (the same values on every run,
    not Sluice's CPU ones)."""
    y0, x0, h, w = e["y"], e["x"], e["h"], e["w"]
    chw = layout == _LAYOUT_CHW
    region = img[:, y0:y0 + h, x0:x0 + w] if chw else img[y0:y0 + h, x0:x0 + w, :]
    c = region.shape[0] if chw else region.shape[2]
    if e["value"] == "random":
        g = torch.Generator().manual_seed(e["seed"] & (2 ** 63 - 1))
        region.copy_(torch.randn(tuple(region.shape), generator=g))
        return
    v = torch.tensor(e["value"][:c], dtype=region.dtype, device=region.device)
    region.copy_(v.view((c, 1, 1) if chw else (1, 1, c)).expand_as(region))


def _indices(b):
    """The batch's sample indices (positions in the source) as int64 on the
    CPU: torch has no general uint64, and sources hold < 2**63 samples."""
    return torch.from_numpy(b.indices.astype(np.int64))


def _move(x, device):
    """To device: through pinned memory and a non-blocking copy for CUDA
    (the copy overlaps with the GPU's work; the normalize queued after it on
    the same stream sees the data); plain elsewhere; untouched for the CPU."""
    if device is None or device.type == "cpu":
        return x
    if device.type == "cuda":
        return x.pin_memory().to(device, non_blocking=True)
    return x.to(device)


class IterableDataset(torch.utils.data.IterableDataset):
    """Yields ``(images, labels)``: images a tensor [n, c, h, w] / [n, h, w, c]
    (a list of tensors when samples differ in shape), labels int64 [n] --
    or, with the spec's ``batch_transforms`` (MixUp / CutMix), soft labels
    float32 [n, num_classes] (train with a soft-target cross entropy).

    ``device`` (a torch.device or a string such as "cuda:0" or "cpu"):
    images and labels are put there, through pinned memory and a
    non-blocking copy for CUDA. None (the default) keeps them on the CPU as
    views of the library's memory. A spec with ``"on": "device"`` is
    normalized on ``device`` (the CPU when None), so images are float32
    whatever the spec.

    Every ``iter()`` opens a new job over ``epochs`` epochs (keyword
    arguments go to ``sluice.Loader``, e.g. ``epochs``, ``seed``, ``offload``)
    numbered from ``set_epoch``'s epoch, or else from where the previous
    iteration's job ended."""

    def __init__(self, dispatcher, spec, device=None, **loader_kwargs):
        super().__init__()
        if "first_epoch" in loader_kwargs:
            raise TypeError("sluice.torch.IterableDataset: use set_epoch(), not first_epoch=")
        self.dispatcher = dispatcher
        self.spec = spec
        self.device = torch.device(device) if device is not None else None
        if loader_kwargs.get("job_secret") is None:
            # torch.distributed: rank 0 draws the multi-rank job's secret and
            # broadcasts it, here in the main process (iter() may run in a
            # DataLoader worker, outside the process group).
            loader_kwargs["job_secret"] = shared_job_secret(
                loader_kwargs.get("world_size", 0))
        self.loader_kwargs = loader_kwargs
        self._norm = _DeviceNormalize()
        self.epoch = 0  # the next job's first epoch
        self._job_first = 0  # the running job's
        self._loader = None
        self._resume = None  # states the next iteration resumes from
        self._desc = None  # sluice.describe of a fresh job (_description)

    def _images(self, b):
        if isinstance(b.images, np.ndarray):
            x = _move(torch.from_numpy(b.images), self.device)
            x = self._norm.batch(x, b.normalize, b.layout) if b.normalize else x
            for e in b.erase or ():
                _erase(x[e["sample"]], e, b.layout)
            return x
        out = []
        for a in b.images:
            x = _move(torch.from_numpy(a), self.device)
            out.append(self._norm.sample(x, b.normalize, b.layout) if b.normalize else x)
        for e in b.erase or ():
            ih, iw = e["image_hw"]
            flat = out[e["sample"]]
            c = flat.numel() // (ih * iw)
            _erase(flat.view((c, ih, iw) if b.layout == _LAYOUT_CHW else (ih, iw, c)), e,
                   b.layout)
        return out

    def _records(self, b, labels):
        """A multimodal batch as a dict of tensors (views of the library's
        memory on the CPU): the ragged arrays of sluice.RecordBatch, tiles
        normalized on ``device`` when the spec says "on": "device"."""
        out = {"labels": labels, "keys": b.keys, "metas": b.metas, "texts": b.texts,
               "steps": b.steps, "microbatches": b.microbatches, "pack": b.pack}
        out["indices"] = _indices(b)
        out["epoch"] = int(b.epoch)
        out["max_seqlen"] = b.max_seqlen  # a Python int, as max_seqlen_q/k want it
        for name in ("tokens", "token_offsets", "input_ids", "cu_seqlens", "seq_lens",
                     "tiles_per_image", "image_offsets", "tile_offsets", "label_ids",
                     "position_ids", "cu_seqlens_i32"):
            a = getattr(b, name)
            if a is None:
                out[name] = None
            else:
                # uint32 counts widen to int64: torch has no general uint32.
                a = a.astype(np.int64) if a.dtype == np.uint32 else a
                out[name] = _move(torch.from_numpy(a), self.device)
        out["image_hw"] = torch.from_numpy(b.image_hw.astype(np.int64))
        tiles = None
        if b.tiles is not None:
            tiles = _move(torch.from_numpy(b.tiles), self.device)
            if b.normalize and tiles.shape[0] > 0:
                tiles = self._norm.batch(tiles, b.normalize, _LAYOUT_CHW)
        out["tiles"] = tiles
        out["images"] = [None if a is None else _move(torch.from_numpy(a), self.device)
                         for a in b.images]
        return out

    # -- what an iteration delivers

    def _description(self):
        """sluice.describe of the next iteration's job. A fresh job's is
        kept (indexing a large source takes a while; every fresh job of
        these arguments counts the same); one that resumes is described
        anew."""
        if self._resume:
            return describe(self.dispatcher, self.spec, resume=self._resume,
                            **self.loader_kwargs)
        if self._desc is None:
            self._desc = describe(self.dispatcher, self.spec, **self.loader_kwargs)
        return self._desc

    def __len__(self):
        """The items (batches) one iteration yields: this rank's batches per
        epoch times the job's epochs (``epochs=1`` with ``set_epoch``: the
        batches of one epoch). What ``len(DataLoader(ds, batch_size=None))``
        and progress bars show; fewer when the iteration resumes a saved
        state or samples are skipped. Known before iterating (the source is
        indexed once for it, no job runs)."""
        return self._description()["batches"]

    @property
    def samples_per_epoch(self):
        """This rank's samples of one epoch (sluice.Loader.samples_per_epoch)."""
        return self._description()["samples_per_epoch"]

    @property
    def batches_per_epoch(self):
        """This rank's batches of one epoch: steps per epoch for an LR
        schedule (balanced batching: microbatches; ``microbatches`` of them
        make a step)."""
        return self._description()["batches_per_epoch"]

    @property
    def classes(self):
        """An imagefolder's class names in label order, as torchvision's
        ImageFolder.classes; None for sources whose labels have no names."""
        c = self._description()["classes"]
        return None if c is None else list(c)

    @property
    def class_to_idx(self):
        """{class name: label}, as torchvision's ImageFolder.class_to_idx; or None."""
        c = self._description()["class_to_idx"]
        return None if c is None else dict(c)

    def report_step(self, seconds):
        """The current job's training step took ``seconds`` (sluice.Loader.report_step)."""
        if self._loader is None:
            raise RuntimeError("report_step: no job is running")
        self._loader.report_step(seconds)

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
        resume, self._resume = self._resume, None
        loader = Loader(self.dispatcher, self.spec, first_epoch=self.epoch, resume=resume,
                        **self.loader_kwargs)
        self._loader = loader
        self._job_first = self.epoch  # a resumed job keeps the saved run's end
        st = loader.stats()
        self.epoch = st["first_epoch"] + st["epochs"]  # also after a break
        try:
            for b in loader.batches():
                if getattr(b, "soft_labels", None) is not None:
                    # batch_transforms (MixUp / CutMix): the labels are soft,
                    # float32 [n, num_classes], for a soft-target loss.
                    y = _move(torch.from_numpy(b.soft_labels), self.device)
                else:
                    y = _move(torch.from_numpy(b.labels.astype(np.int64)), self.device)
                if isinstance(b, RecordBatch):
                    yield self._records(b, y)
                    continue
                yield _Item((self._images(b), y))
        finally:
            loader.close()

    def state_dict(self):
        """The position of the current job (what the items yielded so far
        consumed), to save with the model: ``{"epoch": the next job's first
        epoch, "sluice_states": [one state per rank]}``. Under an initialized
        torch.distributed group every rank must call it at the same step
        (as a distributed checkpoint does): the states are gathered."""
        epoch = self.epoch
        if self._loader is None or self._loader._job is None:
            mine = None  # between jobs: the next one starts fresh at self.epoch
        else:
            mine = self._loader.state()
            epoch = self._job_first
        states = [mine]
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            states = [None] * dist.get_world_size()
            dist.all_gather_object(states, mine)
        states = [s for s in states if s is not None]
        if self._resume and not states:
            states = list(self._resume)  # restored but not iterated yet
        return {"epoch": epoch, "sluice_states": states}

    def load_state_dict(self, state_dict):
        """The next iteration resumes from state_dict (state_dict()'s)."""
        if not isinstance(state_dict, dict) or "sluice_states" not in state_dict:
            raise ValueError("load_state_dict: not a sluice.torch state_dict: %r"
                             % (type(state_dict),))
        self.epoch = int(state_dict.get("epoch", self.epoch))
        states = list(state_dict["sluice_states"])
        self._resume = states or None

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
