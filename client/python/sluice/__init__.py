"""Sluice for Python: batches from a Sluice pipeline as numpy arrays.

    import sluice
    with sluice.Loader("127.0.0.1:7400", "imagenet-train.json", data_root="/data") as loader:
        for images, labels in loader:      # images: float32 [n, 3, 224, 224]
            ...

``dispatcher=None`` runs every stage in this process (no daemons needed).
For PyTorch see ``sluice.torch.IterableDataset``.

Epochs: a Loader runs all of the spec's epochs (or ``epochs=``). A training
loop that opens one job per epoch passes ``epochs=1, first_epoch=e``: epoch e
then has the same order and the same random crops as epoch e of one long
job (the RNG is keyed by seed, epoch and sample index). ``seed=`` replaces
the spec's source seed.

The binding is ctypes over libsluice.so (client/lib/sluice.h); nothing is
compiled. Batches are not copied: each array is a view of the library's own
batch memory, which is handed back to the library (sluice_release_batch)
when the last array viewing it is garbage-collected. Hold on to arrays as
long as you like; the memory is yours until then, and writable.

libsluice.so is looked for in this order: $SLUICE_LIB; next to this
package (the wheel from `make wheel`, which bundles the libraries it needs
in sluice.libs/ and the plugin host in sluice/bin/); build/lib of the
source tree the package sits in; the path `make install` recorded; the
system's library path.
"""

import ctypes
import ctypes.util
import errno
import inspect
import json
import os
import secrets
import sys
import threading
import warnings

import numpy as np

from . import _spec

__all__ = ["Loader", "Batch", "RecordBatch", "SluiceError", "SpecError", "SluiceWarning",
           "describe", "shared_job_secret", "library_path", "version"]

# ---------------------------------------------------------------- library


class SluiceError(RuntimeError):
    """A libsluice call failed; ``code`` is the negative errno it returned."""

    def __init__(self, message, code=-errno.EIO):
        super().__init__(message)
        self.code = code


class SpecError(SluiceError, ValueError):
    """The spec or the options are invalid (the message names file:line:field)."""


class SluiceWarning(UserWarning):
    """Something the job does differently from what was asked (said once per
    job): e.g. every worker refused it, so its remote stages run here."""


_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("SLUICE_LIB")
    if env:
        yield env
        return
    yield os.path.join(_HERE, "libsluice.so")
    # client/python/sluice -> the repository root.
    root = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))
    yield os.path.join(root, os.environ.get("BUILD", "build"), "lib", "libsluice.so")
    try:
        from . import _installed  # written by `make install`

        yield _installed.LIBSLUICE
    except ImportError:
        pass
    found = ctypes.util.find_library("sluice")
    if found:
        yield found
    yield "libsluice.so.0"


_lib = None
library_path = None
_lib_lock = threading.Lock()

# The wheel's own plugin host (scripts/make-wheel), which the library finds
# only through $SLUICE_PLUGIN_HOST: it looks beside the program, python.
_WHEEL_PLUGIN_HOST = os.path.join(_HERE, "bin", "sluice-plugin-host")


def _use_wheel_plugin_host(path):
    if (os.path.dirname(os.path.abspath(path)) == _HERE
            and not os.environ.get("SLUICE_PLUGIN_HOST")
            and os.access(_WHEEL_PLUGIN_HOST, os.X_OK)):
        os.environ["SLUICE_PLUGIN_HOST"] = _WHEEL_PLUGIN_HOST


def _load():
    global _lib, library_path
    with _lib_lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in _candidates():
            if os.path.sep in path and not os.path.exists(path):
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                errors.append("%s: %s" % (path, e))
                continue
            _declare(lib)
            _use_wheel_plugin_host(path)
            _lib, library_path = lib, path
            return lib
        raise SluiceError(
            "libsluice.so not found: install the self-contained wheel (`make wheel` in a"
            " Sluice tree, then `pip install build/wheel/sluice-*.whl`), set SLUICE_LIB,"
            " or build it with `make`"
            + ("; tried " + "; ".join(errors) if errors else ""),
            -errno.ENOENT,
        )


class _Options(ctypes.Structure):
    _fields_ = [
        ("dispatcher", ctypes.c_char_p),
        ("data_root", ctypes.c_char_p),
        ("threads", ctypes.c_uint),
        ("offload", ctypes.c_char_p),
        ("epochs", ctypes.c_uint),
        ("timeout_ms", ctypes.c_int),
        ("consumer_rate", ctypes.c_double),
        # Multi-rank jobs (sluice.h): rank of world_size, the job's name.
        ("rank", ctypes.c_uint),
        ("world_size", ctypes.c_uint),
        ("job_name", ctypes.c_char_p),
        # Dispatcher outages and transport security (sluice.h).
        ("dispatcher_timeout_ms", ctypes.c_int),
        ("tls_ca", ctypes.c_char_p),
        ("tls_cert", ctypes.c_char_p),
        ("tls_key", ctypes.c_char_p),
        ("token_file", ctypes.c_char_p),
        # Appended later (sluice.h): epoch numbering and the seed override.
        ("first_epoch", ctypes.c_uint64),
        ("has_seed", ctypes.c_int),
        ("seed", ctypes.c_uint64),
        # Resume from saved states (sluice.h).
        ("resume_states", ctypes.POINTER(ctypes.c_char_p)),
        ("resume_state_lens", ctypes.POINTER(ctypes.c_size_t)),
        ("n_resume_states", ctypes.c_uint),
        ("plugin_dir", ctypes.c_char_p),
        ("job_secret", ctypes.c_char_p),  # multi-rank: the ranks' shared secret
        # URL sources (sluice.h): remote_roots, the shard cache and its bound.
        ("remote_roots", ctypes.c_char_p),
        ("cache_dir", ctypes.c_char_p),
        ("cache_bytes", ctypes.c_uint64),
        ("always_profile", ctypes.c_int),  # no short-job guard (sluice.h)
        # Zeroed room for fields a newer libsluice may append: it then reads
        # zeros (its defaults) instead of whatever follows this struct.
        ("_reserved", ctypes.c_uint8 * 512),
    ]


class _Erase(ctypes.Structure):
    # sluice_erase_t: a random_erasing the consumer applies after its device
    # normalize.
    _fields_ = [
        ("seed", ctypes.c_uint64),
        ("sample", ctypes.c_uint32),
        ("x", ctypes.c_uint32),
        ("y", ctypes.c_uint32),
        ("w", ctypes.c_uint32),
        ("h", ctypes.c_uint32),
        ("random", ctypes.c_int),
        ("value", ctypes.c_float * 3),
        ("img_h", ctypes.c_uint32),
        ("img_w", ctypes.c_uint32),
    ]


class _Batch(ctypes.Structure):
    # Only read; fields appended by a newer library are simply not seen.
    _fields_ = [
        ("epoch", ctypes.c_uint64),
        ("n", ctypes.c_uint32),
        ("uniform", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("layout", ctypes.c_int),
        ("h", ctypes.c_uint32),
        ("w", ctypes.c_uint32),
        ("c", ctypes.c_uint32),
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_size_t),
        ("labels", ctypes.POINTER(ctypes.c_int32)),
        ("indices", ctypes.POINTER(ctypes.c_uint64)),
        ("offsets", ctypes.POINTER(ctypes.c_size_t)),
        ("sizes", ctypes.POINTER(ctypes.c_size_t)),
        ("priv", ctypes.c_void_p),
        # The normalization the consumer applies ("on": "device").
        ("norm_on_device", ctypes.c_int),
        ("norm_mean", ctypes.c_float * 3),
        ("norm_std", ctypes.c_float * 3),
        ("priv_records", ctypes.c_void_p),
        ("positions", ctypes.POINTER(ctypes.c_uint64)),
        ("rank", ctypes.c_uint32),
        ("step_samples", ctypes.c_uint32),
        ("batch_size", ctypes.c_uint32),
        # The spec's "batch_transforms" (MixUp / CutMix).
        ("soft_labels", ctypes.POINTER(ctypes.c_float)),
        ("num_classes", ctypes.c_uint32),
        ("mix_op", ctypes.c_int),
        ("mix_lambda", ctypes.c_double),
        ("mix_box", ctypes.c_uint32 * 4),
        # "batching": "packed": this pack's step, microbatch and token counts.
        ("step", ctypes.c_uint64),
        ("microbatch", ctypes.c_uint32),
        ("pack_tokens", ctypes.c_uint64),
        ("rank_step_tokens", ctypes.c_uint64),
        ("global_step_tokens", ctypes.c_uint64),
        # random_erasing after a device normalize: the consumer's boxes.
        ("erase", ctypes.POINTER(_Erase)),
        ("nerase", ctypes.c_uint32),
    ]


class _Records(ctypes.Structure):
    # sluice_records_t, read only.
    _P = ctypes.c_void_p
    _fields_ = [
        ("n", ctypes.c_uint32),
        ("keys", ctypes.POINTER(ctypes.c_char_p)),
        ("metas", ctypes.POINTER(ctypes.c_char_p)),
        ("text", _P),
        ("text_offsets", _P),
        ("tokens", _P),
        ("token_offsets", _P),
        ("input_ids", _P),
        ("cu_seqlens", _P),
        ("seq_lens", _P),
        ("nimages", ctypes.c_uint64),
        ("image_offsets", _P),
        ("image_hw", _P),
        ("image_data", ctypes.POINTER(ctypes.c_size_t)),
        ("image_nbytes", ctypes.POINTER(ctypes.c_size_t)),
        ("image_shape", ctypes.POINTER(ctypes.c_uint32)),
        ("image_dtype", ctypes.POINTER(ctypes.c_int)),
        ("image_layout", ctypes.POINTER(ctypes.c_int)),
        ("tiles", _P),
        ("tiles_dtype", ctypes.c_int),
        ("ntiles", ctypes.c_uint64),
        ("tile", ctypes.c_uint32),
        ("tile_c", ctypes.c_uint32),
        ("tiles_per_image", _P),
        ("tile_offsets", _P),
        ("labels", _P),
        ("position_ids", _P),
        ("cu_seqlens_i32", _P),
        ("max_seqlen", ctypes.c_int32),
    ]


class _Stats(ctypes.Structure):
    _fields_ = [
        ("delivered", ctypes.c_uint64),
        ("skipped", ctypes.c_uint64),
        ("duplicates_dropped", ctypes.c_uint64),
        ("from_local", ctypes.c_uint64),
        ("from_remote", ctypes.c_uint64),
        ("seconds", ctypes.c_double),
        ("wait_seconds", ctypes.c_double),
        ("plan_split", ctypes.c_uint32),
        ("plan_local_share", ctypes.c_double),
        ("plan_mode", ctypes.c_char * 64),
        ("job_id", ctypes.c_uint64),
        ("plan_predicted", ctypes.c_double),
        ("plan_binding", ctypes.c_char * 32),
        ("plan_version", ctypes.c_uint32),
        ("profile_seconds", ctypes.c_double),
        ("sample_costs", ctypes.c_char * 16),
        # Appended later (sluice.h).
        ("first_epoch", ctypes.c_uint64),
        ("epochs", ctypes.c_uint32),
        ("fallback", ctypes.c_char * 256),
        ("trainer_steps", ctypes.c_uint64),
        ("trainer_fitted", ctypes.c_int),
        ("trainer_coef", ctypes.c_double * 4),
        ("trainer_error", ctypes.c_double),
        ("step_load", ctypes.c_double),
        ("step_imbalance", ctypes.c_double),
        ("step_imbalance_max", ctypes.c_double),
        ("plan_compress", ctypes.c_int),
        ("pack_fill", ctypes.c_double),
        ("pack_oversize", ctypes.c_uint64),
        ("guard_choice", ctypes.c_char * 8),  # the short-job guard (sluice.h)
        ("guard_reason", ctypes.c_char * 8),
        ("guard_rate_off", ctypes.c_double),
        ("guard_rate_all", ctypes.c_double),
        ("guard_rate_both", ctypes.c_double),
        ("guard_profile_sec", ctypes.c_double),
        ("guard_gain_sec", ctypes.c_double),
        ("guard_seconds", ctypes.c_double),
        # The library writes this struct: room for fields it may grow.
        ("_reserved", ctypes.c_uint8 * 1024),
    ]


class _Skip(ctypes.Structure):
    # Written by the library into an array: the size must match sluice.h
    # exactly (the layout check in tests/integration/test_python.sh).
    _fields_ = [
        ("epoch", ctypes.c_uint64),
        ("index", ctypes.c_uint64),
        ("reason", ctypes.c_char * 16),
        ("path", ctypes.c_char * 256),
        ("detail", ctypes.c_char * 256),
    ]


_RECENT_SKIPS = 64  # SLUICE_RECENT_SKIPS


def _declare(lib):
    vp, cp, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    lib.sluice_open.argtypes = [cp, ctypes.POINTER(_Options), ctypes.POINTER(vp), cp,
                                ctypes.c_size_t]
    lib.sluice_open.restype = i
    lib.sluice_open_json.argtypes = [cp, ctypes.c_size_t, cp, ctypes.POINTER(_Options),
                                     ctypes.POINTER(vp), cp, ctypes.c_size_t]
    lib.sluice_open_json.restype = i
    lib.sluice_next_batch.argtypes = [vp, ctypes.POINTER(ctypes.POINTER(_Batch))]
    lib.sluice_next_batch.restype = i
    lib.sluice_release_batch.argtypes = [vp, ctypes.POINTER(_Batch)]
    lib.sluice_release_batch.restype = None
    lib.sluice_last_error.argtypes = [vp]
    lib.sluice_last_error.restype = cp
    lib.sluice_get_stats.argtypes = [vp, ctypes.POINTER(_Stats)]
    lib.sluice_get_stats.restype = None
    lib.sluice_mix_nsources.argtypes = [vp]
    lib.sluice_mix_nsources.restype = ctypes.c_uint32
    lib.sluice_mix_source_name.argtypes = [vp, ctypes.c_uint32]
    lib.sluice_mix_source_name.restype = cp
    lib.sluice_mix_source_share.argtypes = [vp, ctypes.c_uint32]
    lib.sluice_mix_source_share.restype = ctypes.c_double
    lib.sluice_mix_samples_per_epoch.argtypes = [vp]
    lib.sluice_mix_samples_per_epoch.restype = ctypes.c_uint64
    lib.sluice_sample_source.argtypes = [vp, ctypes.c_uint64]
    lib.sluice_sample_source.restype = i
    lib.sluice_local_reason.argtypes = [vp, cp, ctypes.c_size_t]
    lib.sluice_local_reason.restype = i
    lib.sluice_skip_counts.argtypes = [vp, ctypes.POINTER(cp), ctypes.POINTER(ctypes.c_uint64), i]
    lib.sluice_skip_counts.restype = i
    lib.sluice_recent_skips.argtypes = [vp, ctypes.POINTER(_Skip), i]
    lib.sluice_recent_skips.restype = i
    lib.sluice_batch_records.argtypes = [vp, ctypes.POINTER(_Batch),
                                         ctypes.POINTER(ctypes.POINTER(_Records))]
    lib.sluice_batch_records.restype = i
    lib.sluice_report_step.argtypes = [vp, ctypes.c_double]
    lib.sluice_report_step.restype = i
    lib.sluice_state_save.argtypes = [vp, ctypes.POINTER(ctypes.c_void_p),
                                      ctypes.POINTER(ctypes.c_size_t)]
    lib.sluice_state_save.restype = i
    lib.sluice_state_free.argtypes = [ctypes.c_void_p]
    lib.sluice_state_free.restype = None
    lib.sluice_version.argtypes = []
    lib.sluice_version.restype = cp
    lib.sluice_close.argtypes = [vp]
    lib.sluice_close.restype = None
    if hasattr(lib, "sluice_secret_warning"):
        lib.sluice_secret_warning.argtypes = [vp]
        lib.sluice_secret_warning.restype = cp
    u64p = ctypes.POINTER(ctypes.c_uint64)
    lib.sluice_describe.argtypes = [cp, cp, ctypes.c_size_t, ctypes.POINTER(_Options),
                                    ctypes.POINTER(vp), cp, ctypes.c_size_t]
    lib.sluice_describe.restype = i
    lib.sluice_epoch_counts.argtypes = [vp, ctypes.c_uint64, u64p, u64p]
    lib.sluice_epoch_counts.restype = i
    lib.sluice_job_counts.argtypes = [vp, u64p, u64p]
    lib.sluice_job_counts.restype = i
    lib.sluice_num_classes.argtypes = [vp]
    lib.sluice_num_classes.restype = ctypes.c_uint32
    lib.sluice_class_name.argtypes = [vp, ctypes.c_uint32]
    lib.sluice_class_name.restype = cp


def shared_job_secret(world_size):
    """The secret the ranks of a multi-rank job share, drawn by rank 0 and
    broadcast through the initialized ``torch.distributed`` process group
    (``broadcast_object_list``), or None: not a multi-rank job
    (``world_size`` < 2), no process group of more than one rank, or
    ``SLUICE_JOB_SECRET`` set (then the library uses it). A collective
    call: every rank calls it, at the same point. ``sluice.Loader`` and
    ``sluice.torch.IterableDataset`` call it when given ``world_size`` > 1
    and no ``job_secret``."""
    dist = sys.modules.get("torch.distributed")
    if (int(world_size) < 2 or os.environ.get("SLUICE_JOB_SECRET") or dist is None
            or not dist.is_available() or not dist.is_initialized()
            or dist.get_world_size() < 2):
        return None
    box = [secrets.token_hex(32) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


# ---------------------------------------------------------------- jobs

_DTYPES = {0: np.dtype(np.uint8), 1: np.dtype(np.uint8), 2: np.dtype(np.float32)}
_DT_RECORD = 4
_LAYOUT_HWC, _LAYOUT_CHW = 0, 1


class _Job:
    """The C job handle. Closed when the Loader is closed *and* no batch is
    still held (batch memory belongs to the job until released), so arrays
    may outlive the Loader.

    libsluice allows one thread at a time per job. Batches are released from
    whichever thread drops the last array, so a release from another thread
    is queued and carried out by the loader's thread at its next call."""

    def __init__(self, lib, handle):
        self.lib = lib
        self.handle = handle
        self.thread = threading.get_ident()
        self.lock = threading.Lock()  # guards live, closing, pending
        self.live = 0
        self.closing = False
        self.pending = []

    def release(self, bptr):
        with self.lock:
            # Once closing, the loader's thread makes no more calls: any
            # thread may release (and the last one closes).
            if threading.get_ident() != self.thread and not self.closing:
                self.pending.append(bptr)
                return
        self._release_now(bptr)

    def _release_now(self, bptr):
        close = False
        with self.lock:
            if self.handle is not None:
                self.lib.sluice_release_batch(self.handle, bptr)
            self.live -= 1
            close = self.closing and self.live == 0
        if close:
            self._close_now()

    def flush(self):
        """Carries out queued releases (the loader's thread only)."""
        with self.lock:
            todo, self.pending = self.pending, []
        for bptr in todo:
            self._release_now(bptr)

    def close(self):
        self.flush()
        with self.lock:
            self.closing = True
            idle = self.live == 0
        if idle:
            self._close_now()

    def _close_now(self):
        with self.lock:
            h, self.handle = self.handle, None
        if h is not None:
            self.lib.sluice_close(h)


class _Owner:
    """Numpy's view of one batch's bytes (its __array_interface__). When the
    last array based on it goes away, the batch goes back to the library."""

    def __init__(self, job, bptr, addr, nbytes):
        self._job = job
        self._bptr = bptr
        self.__array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (addr, False),
            "version": 3,
        }

    def __del__(self):
        job, self._job = self._job, None
        if job is not None:
            job.release(self._bptr)


class Batch:
    """One batch. ``images`` is an ndarray [n, h, w, c] (HWC) or [n, c, h, w]
    (CHW) when every sample has the same shape, else a list of n 1-D arrays
    (uint8 for encoded bytes, else the output dtype). ``labels`` (int32) and
    ``indices`` (uint64, the samples' positions in the source) are small
    copies; ``epoch`` counts from 0. ``normalize`` is None, or for a spec whose
    normalize has ``"on": "device"`` the ``(mean, std)`` tuples the consumer
    applies to the uint8 images: ``(x / 255 - mean[c]) / std[c]``.

    With the spec's ``batch_transforms`` (MixUp / CutMix, torchvision's
    semantics) the images are already mixed and ``soft_labels`` is a float32
    [n, num_classes] copy to train on (``labels`` stay the samples' own);
    ``mix`` says what applied: ``None`` without batch transforms, else a
    dict ``{"op": "none" | "mixup" | "cutmix", "lambda": float, "box": (x1,
    y1, x2, y2)}`` (the CutMix box pasted from sample j - 1, end exclusive;
    lambda corrected to 1 - box area / (h * w)).

    ``erase`` is None, or for a ``random_erasing`` after a normalize with
    ``"on": "device"`` the boxes the consumer erases after normalizing, in
    order: dicts ``{"sample", "x", "y", "w", "h", "value", "seed",
    "image_hw"}`` (rows y..y+h-1, columns x..x+w-1 of every channel become
    ``value[c]`` in normalized units, or standard normal values drawn with a
    generator seeded by ``seed`` when ``value`` is ``"random"``);
    ``sluice.torch`` applies them."""

    __slots__ = ("epoch", "images", "labels", "indices", "layout", "normalize", "soft_labels",
                 "mix", "erase")

    def __init__(self, epoch, images, labels, indices, layout, normalize=None, soft_labels=None,
                 mix=None, erase=None):
        self.epoch = epoch
        self.images = images
        self.labels = labels
        self.indices = indices
        self.layout = layout
        self.normalize = normalize
        self.soft_labels = soft_labels
        self.mix = mix
        self.erase = erase

    def __len__(self):
        return len(self.labels)

    def __repr__(self):
        shape = self.images.shape if isinstance(self.images, np.ndarray) else "list"
        return "<sluice.Batch epoch=%d n=%d images=%s>" % (self.epoch, len(self), shape)


_MIX_OPS = ("none", "mixup", "cutmix")


def _mix_of(b):
    """(soft_labels copy, mix dict) of a batch with batch transforms, else
    (None, None)."""
    if not b.soft_labels or not b.num_classes:
        return None, None
    k = b.num_classes
    soft = np.ctypeslib.as_array(b.soft_labels, (b.n * k,)).reshape(b.n, k).copy()
    op = _MIX_OPS[b.mix_op] if 0 <= b.mix_op < len(_MIX_OPS) else str(b.mix_op)
    return soft, {"op": op, "lambda": b.mix_lambda, "box": tuple(b.mix_box)}


def _erase_of(b):
    """The random_erasing boxes the consumer applies after its device
    normalize, as dicts (Batch.erase), or None."""
    if not b.erase:
        return None
    out = []
    for k in range(b.nerase):
        e = b.erase[k]
        out.append({"sample": e.sample, "x": e.x, "y": e.y, "w": e.w, "h": e.h,
                    "value": "random" if e.random else tuple(e.value), "seed": e.seed,
                    "image_hw": (e.img_h, e.img_w)})
    return out


class _View:
    """Numpy's view of library memory that belongs to a batch (the record
    layout): arrays over it keep the batch's _Owner, so the batch is released
    only when the last of them goes."""

    def __init__(self, owner, addr, shape, dtype):
        self._owner = owner
        self.__array_interface__ = {
            "shape": tuple(shape),
            "typestr": np.dtype(dtype).str,
            "data": (addr, False),
            "version": 3,
        }


def _array(owner, addr, shape, dtype):
    if not addr or 0 in shape:
        return np.empty(shape, dtype)
    return np.asarray(_View(owner, addr, shape, dtype))


class RecordBatch:
    """One batch of a multimodal spec (webdataset or jsonl source), laid out
    for a model: ragged arrays with offsets, no copies (numpy views of the
    library's memory, which stays alive while any of them does).

    keys, metas (dicts), texts     one per sample
    labels (int32), indices (uint64), epoch
    tokens (int32) + token_offsets (int64, n + 1)     the text's token ids
    input_ids (int32) + cu_seqlens (int64, n + 1)     the template's sequence
    seq_lens (int64, n)            sequence length on the GPU
    tiles                          [n_tiles, 3, tile, tile] (uint8, or float32)
    tiles_per_image, image_offsets (n + 1), tile_offsets (n + 1), image_hw
                                   [n_images, 2] decoded height and width
    images                         untiled images: a list of arrays (None where tiled)
    normalize                      None, or (mean, std) for "on": "device"
    steps, microbatches            balanced or packed batching: each sample's step
                                   and microbatch in this rank's schedule (else None)
    pack                           packed batching: this batch is one pack --
                                   {"step", "microbatch", "tokens" (the pack's),
                                   "rank_step_tokens", "global_step_tokens"} (the
                                   loss-normalisation counts); else None
    The batch as one packed sequence (template), as varlen attention takes it
    (flash_attn_varlen_func(q, k, v, cu_seqlens_q=b.cu_seqlens_i32, ...,
    max_seqlen_q=b.max_seqlen, ...)):
    label_ids (int32)              input_ids' length: the template's labels
                                   (ignore_index where not trained; unshifted, as
                                   Hugging Face's labels); named so because
                                   ``labels`` is the samples' class labels
    position_ids (int32)           input_ids' length: 0, 1, ... per sample
    cu_seqlens_i32 (int32, n + 1)  cu_seqlens as int32
    max_seqlen (int)               the longest sample's input_ids
    Arrays of what the spec does not make (no tokenize: tokens) are None."""

    __slots__ = ("epoch", "keys", "metas", "texts", "labels", "indices", "steps", "microbatches",
                 "pack", "tokens",
                 "token_offsets", "input_ids", "cu_seqlens", "seq_lens", "tiles",
                 "tiles_per_image", "image_offsets", "tile_offsets", "image_hw", "images",
                 "normalize", "label_ids", "position_ids", "cu_seqlens_i32", "max_seqlen")

    def __len__(self):
        return len(self.labels)

    def __repr__(self):
        tiles = None if self.tiles is None else self.tiles.shape
        return "<sluice.RecordBatch epoch=%d n=%d images=%d tiles=%s>" % (
            self.epoch, len(self), len(self.image_hw), tiles)


def _record_batch(lib, job, bptr, owner, raw, labels, indices, norm):
    b = bptr.contents
    rp = ctypes.POINTER(_Records)()
    rc = lib.sluice_batch_records(job.handle, bptr, ctypes.byref(rp))
    if rc < 0:
        msg = lib.sluice_last_error(job.handle)
        raise SluiceError(msg.decode(errors="replace") if msg else os.strerror(-rc), rc)
    r = rp.contents
    n, ni = r.n, r.nimages
    out = RecordBatch()
    out.epoch, out.labels, out.indices, out.normalize = b.epoch, labels, indices, norm
    out.keys = [r.keys[k].decode(errors="replace") for k in range(n)]
    out.steps = out.microbatches = out.pack = None
    if b.global_step_tokens:
        out.pack = {"step": int(b.step), "microbatch": int(b.microbatch),
                    "tokens": int(b.pack_tokens), "rank_step_tokens": int(b.rank_step_tokens),
                    "global_step_tokens": int(b.global_step_tokens)}
    if b.step_samples and n:
        pos = np.ctypeslib.as_array(b.positions, (n,)).astype(np.int64)
        out.steps = pos // b.step_samples
        out.microbatches = pos % b.step_samples // b.batch_size
    out.metas = [json.loads(r.metas[k].decode(errors="replace")) for k in range(n)]
    toff = _array(owner, r.text_offsets, (n + 1,), np.int64)
    text = ctypes.string_at(r.text, int(toff[-1])) if n and toff[-1] else b""
    out.texts = [text[int(toff[k]):int(toff[k + 1])].decode(errors="replace")
                 for k in range(n)]
    out.token_offsets = _array(owner, r.token_offsets, (n + 1,), np.int64)
    out.tokens = (_array(owner, r.tokens, (int(out.token_offsets[-1]),), np.int32)
                  if r.tokens else None)
    out.cu_seqlens = _array(owner, r.cu_seqlens, (n + 1,), np.int64)
    out.input_ids = (_array(owner, r.input_ids, (int(out.cu_seqlens[-1]),), np.int32)
                     if r.input_ids else None)
    out.seq_lens = _array(owner, r.seq_lens, (n,), np.int64)
    nids = int(out.cu_seqlens[-1])
    out.label_ids = _array(owner, r.labels, (nids,), np.int32) if r.labels else None
    out.position_ids = (_array(owner, r.position_ids, (nids,), np.int32)
                        if r.position_ids else None)
    out.cu_seqlens_i32 = (_array(owner, r.cu_seqlens_i32, (n + 1,), np.int32)
                          if r.cu_seqlens_i32 else None)
    out.max_seqlen = int(r.max_seqlen) if r.input_ids else None
    out.image_offsets = _array(owner, r.image_offsets, (n + 1,), np.int64)
    out.tile_offsets = _array(owner, r.tile_offsets, (n + 1,), np.int64)
    out.image_hw = _array(owner, r.image_hw, (ni, 2), np.uint32)
    out.tiles_per_image = _array(owner, r.tiles_per_image, (ni,), np.uint32)
    out.tiles = None
    if r.tiles:
        dt = _DTYPES.get(r.tiles_dtype, np.dtype(np.uint8))
        out.tiles = _array(owner, r.tiles, (r.ntiles, r.tile_c, r.tile, r.tile), dt)
    images = []
    for k in range(ni):
        off = r.image_data[k]
        if off == ctypes.c_size_t(-1).value:
            images.append(None)
            continue
        h, w, c = r.image_shape[3 * k], r.image_shape[3 * k + 1], r.image_shape[3 * k + 2]
        dt = _DTYPES.get(r.image_dtype[k], np.dtype(np.uint8))
        piece = raw[off:off + r.image_nbytes[k]].view(dt)
        if r.image_dtype[k] != 0:  # pixels, not encoded bytes
            piece = piece.reshape((c, h, w) if r.image_layout[k] == _LAYOUT_CHW else (h, w, c))
        images.append(piece)
    out.images = images
    return out


def _u64(name, value, hi):
    """An integer option checked here, so a wrong type or range is a
    SpecError naming it rather than a ctypes error or a wrapped int."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise SpecError("%s: %r is not an integer" % (name, value), -errno.EINVAL)
    if not 0 <= int(value) <= hi:
        raise SpecError("%s: %r is not in 0..%d" % (name, value, hi), -errno.EINVAL)
    return int(value)


# Loader's keyword arguments and their defaults (describe() takes the same).
_LOADER_DEFAULTS = dict(data_root=None, threads=0, offload=None, epochs=0, timeout_ms=0, rank=0,
                        world_size=0, job_name=None, consumer_rate=0.0,
                        dispatcher_timeout_ms=0, tls_ca=None, tls_cert=None, tls_key=None,
                        token_file=None, first_epoch=0, seed=None, plugin_dir=None,
                        job_secret=None, remote_roots=None, cache_dir=None, cache_bytes=0,
                        always_profile=False)


def _open(lib, args, resume, describe):
    """Opens the job of Loader's arguments (sluice_describe: only to
    describe it); returns its handle, and the option strings the job keeps
    pointing to (they must outlive it), or raises why not."""
    (dispatcher, spec, data_root, threads, offload, epochs, timeout_ms, rank, world_size,
     job_name, consumer_rate, dispatcher_timeout_ms, tls_ca, tls_cert, tls_key, token_file,
     first_epoch, seed, plugin_dir, job_secret, remote_roots, cache_dir, cache_bytes,
     always_profile) = (
        args.get(k) for k in ("dispatcher", "spec", "data_root", "threads", "offload", "epochs",
                              "timeout_ms", "rank", "world_size", "job_name", "consumer_rate",
                              "dispatcher_timeout_ms", "tls_ca", "tls_cert", "tls_key",
                              "token_file", "first_epoch", "seed", "plugin_dir", "job_secret",
                              "remote_roots", "cache_dir", "cache_bytes", "always_profile"))
    cache_bytes = _u64("cache_bytes", cache_bytes or 0, 2**63 - 1)
    if 0 < cache_bytes < 1 << 20:
        raise SpecError("cache_bytes: %r is below 1048576" % (cache_bytes,), -errno.EINVAL)
    # Checked here as well as by the library, so a wrong type or range
    # is a SpecError naming the argument rather than a ctypes error or
    # a silently wrapped int.
    if not 0 <= int(dispatcher_timeout_ms) <= 86400000:
        raise SpecError("dispatcher_timeout_ms: %r is not 0..86400000 ms"
                        % (dispatcher_timeout_ms,), -errno.EINVAL)
    if (tls_cert is None) != (tls_key is None):
        raise SpecError("tls_cert and tls_key go together", -errno.EINVAL)
    rate = float(consumer_rate)
    if not 0.0 <= rate <= 1e9:  # also refuses NaN
        raise SpecError("consumer_rate: %r is not 0..1e9 samples/s" % (consumer_rate,),
                        -errno.EINVAL)
    first_epoch = _u64("first_epoch", first_epoch, 2**32 - 1)
    if seed is not None:
        seed = _u64("seed", seed, 2**63 - 1)
    if isinstance(spec, dict):
        try:
            text = _spec.to_json(spec)
        except ValueError as e:
            raise SpecError("<spec dict>: %s" % e, -errno.EINVAL) from None
        path = None
    else:
        text, path = None, os.fspath(spec)
    keep = [os.fsencode(s) if s is not None else None
            for s in (dispatcher, data_root, offload, job_name, tls_ca, tls_cert,
                      tls_key, token_file, plugin_dir, job_secret, remote_roots, cache_dir)]
    opts = _Options()
    (opts.dispatcher, opts.data_root, opts.offload, opts.job_name, opts.tls_ca,
     opts.tls_cert, opts.tls_key, opts.token_file, opts.plugin_dir, opts.job_secret,
     opts.remote_roots, opts.cache_dir) = keep
    opts.cache_bytes = cache_bytes
    opts.always_profile = int(bool(always_profile))
    opts.threads = int(threads)
    opts.epochs = int(epochs)
    opts.timeout_ms = int(timeout_ms)
    opts.rank = int(rank)
    opts.world_size = int(world_size)
    opts.consumer_rate = rate
    opts.dispatcher_timeout_ms = int(dispatcher_timeout_ms)
    opts.first_epoch = first_epoch
    opts.has_seed = int(seed is not None)
    opts.seed = seed or 0
    states = _states_of(resume)
    if states:
        bufs = (ctypes.c_char_p * len(states))(*states)
        lens = (ctypes.c_size_t * len(states))(*[len(s) for s in states])
        opts.resume_states, opts.resume_state_lens = bufs, lens
        opts.n_resume_states = len(states)
    handle = ctypes.c_void_p()
    err = ctypes.create_string_buffer(8192)  # a bad spec's errors, one a line
    if describe:
        rc = lib.sluice_describe(b"<spec dict>" if text is not None else os.fsencode(path),
                                 text, len(text) if text is not None else 0,
                                 ctypes.byref(opts), ctypes.byref(handle), err, len(err))
    elif text is not None:
        rc = lib.sluice_open_json(text, len(text), b"<spec dict>", ctypes.byref(opts),
                                  ctypes.byref(handle), err, len(err))
    else:
        rc = lib.sluice_open(os.fsencode(path), ctypes.byref(opts), ctypes.byref(handle),
                             err, len(err))
    if rc < 0:
        msg = err.value.decode(errors="replace") or os.strerror(-rc)
        raise (SpecError if rc == -errno.EINVAL else SluiceError)(msg, rc)
    return handle.value, keep


def _mix_info(lib, handle):
    """A mixed job's sources (docs/mixing.md): names, weight shares, the
    epoch's positions and where each source's sample indices end (the
    library's sluice_sample_source, searched: the sources are contiguous
    ranges of the indices), or None for one source."""
    k = lib.sluice_mix_nsources(handle)
    if k == 0:
        return None
    ends = []
    lo = 0
    for j in range(k):
        # The first index past source j: grow a bound, then halve.
        hi = max(lo, 1)
        while 0 <= lib.sluice_sample_source(handle, hi) <= j:
            hi *= 2
        while lo < hi:
            mid = (lo + hi) // 2
            if 0 <= lib.sluice_sample_source(handle, mid) <= j:
                lo = mid + 1
            else:
                hi = mid
        ends.append(lo)
    return {"names": [lib.sluice_mix_source_name(handle, j).decode(errors="replace")
                      for j in range(k)],
            "weight_shares": [lib.sluice_mix_source_share(handle, j) for j in range(k)],
            "samples_per_epoch": lib.sluice_mix_samples_per_epoch(handle),
            "ends": ends}


def _describe_job(lib, handle):
    """What the open job delivers (sluice_epoch_counts, sluice_job_counts)
    and its source's class names, read once: they do not change."""
    s, b = ctypes.c_uint64(), ctypes.c_uint64()
    lib.sluice_epoch_counts(handle, 2**64 - 1, ctypes.byref(s), ctypes.byref(b))
    info = {"samples_per_epoch": s.value, "batches_per_epoch": b.value}
    lib.sluice_job_counts(handle, ctypes.byref(s), ctypes.byref(b))
    info["samples"], info["batches"] = s.value, b.value
    classes = None
    if lib.sluice_class_name(handle, 0) is not None:
        classes = [lib.sluice_class_name(handle, k).decode(errors="surrogateescape")
                   for k in range(lib.sluice_num_classes(handle))]
    info["classes"] = classes
    info["class_to_idx"] = None if classes is None else {c: k for k, c in enumerate(classes)}
    info["mix"] = _mix_info(lib, handle)
    return info


def describe(dispatcher, spec, **kwargs):
    """What ``Loader(dispatcher, spec, **kwargs)`` would deliver, without
    running it (the spec and options are checked and the source indexed as
    the Loader does; no dispatcher is contacted). A dict:

    samples_per_epoch, batches_per_epoch
                this rank's share of one epoch (Loader.samples_per_epoch)
    samples, batches
                over the job's epochs, what iterating it delivers (len(Loader))
    classes, class_to_idx
                an imagefolder's class names in label order, as torchvision's
                ImageFolder has them; None for sources whose labels have no names
    epochs, first_epoch
                the job's epochs"""
    lib = _load()
    args = dict(_LOADER_DEFAULTS, dispatcher=dispatcher, spec=spec)
    resume = kwargs.pop("resume", None)
    # Loader's arguments that do not change what a job delivers (added
    # later, say) are accepted and left out; others are refused as Loader
    # would refuse them.
    accepted = inspect.signature(Loader.__init__).parameters
    unknown = [k for k in kwargs if k not in accepted]
    if unknown:
        raise TypeError("describe: unexpected argument %r" % unknown[0])
    args.update((k, v) for k, v in kwargs.items() if k in args)
    handle, keep = _open(lib, args, resume, describe=True)
    try:
        info = _describe_job(lib, handle)
        st = _Stats()
        lib.sluice_get_stats(handle, ctypes.byref(st))
        info["epochs"], info["first_epoch"] = st.epochs, st.first_epoch
        return info
    finally:
        lib.sluice_close(handle)
        del keep


class Loader:
    """Iterates a Sluice job's batches as ``(images, labels)`` numpy pairs.

    dispatcher  "HOST:PORT" of a sluice-dispatcher, or None to run every
                stage locally (no daemons)
    spec        path of a pipeline spec (JSON), or the spec as a dict
    data_root   directory the spec's source path is relative to (default ".")
    threads     local decode threads (0 = online CPUs)
    offload     None (the spec's), "off", "all", "auto", "fastflow" or "K:F"
    epochs      0 = the spec's
    first_epoch number of the job's first epoch (default 0): epochs=1,
                first_epoch=e delivers what epoch e of one longer job does
                (same order, same random crops)
    seed        replaces the spec's source seed (None = the spec's; 0..2**63-1)
    timeout_ms  RPC deadline (0 = the library's default, 10 s)
    rank, world_size
                multi-GPU training: this process is ``rank`` of ``world_size``
                consumers of one job and gets its equal, disjoint share of
                every epoch (world_size 0 = the spec's, default 1)
    job_name    the job the ranks share (None = derived from the spec)
    consumer_rate
                samples/s the training loop takes, for the auto/fastflow
                planner (0 = measured while running)
    dispatcher_timeout_ms
                fail only after the dispatcher has not answered for this
                long (0 = 60000); meanwhile workers' batches keep flowing
    tls_ca, tls_cert, tls_key
                PEM files: any of them turns TLS on for every channel
                (dispatcher and workers); tls_ca = the roots to trust (None =
                the system's); tls_cert + tls_key (together) present a client
                certificate (mutual TLS)
    token_file  a file holding the cluster's bearer token
    plugin_dir  directory of stage plugins for the spec's "plugin" stages (None =
                $SLUICE_PLUGIN_DIR; docs/plugins.md). They run in
                sluice-plugin-host processes: $SLUICE_PLUGIN_HOST, else the
                one beside libsluice.so or in its ../bin (a source tree's
                build/, an installed prefix), else PATH; when none is found
                the SpecError says where it looked
    resume      continue a run that was stopped: the states it saved (one
                per rank, bytes from ``state()``, or a ``state_dict()``), so
                that this job delivers exactly what they did not consume,
                with the same bytes per sample; rank and world_size may
                differ from that run's (docs/protocol.md "Resume")
    remote_roots
                comma-separated URL prefixes (http://, https://,
                s3://bucket/) the spec's source may read (None =
                $SLUICE_REMOTE_ROOTS, else none: a URL is a SpecError naming
                it and the setting; docs/sources.md "Remote sources")
    cache_dir, cache_bytes
                this host's shard cache for URL sources and its bound (None
                / 0 = $SLUICE_CACHE_DIR / $SLUICE_CACHE_BYTES, else
                ~/.cache/sluice and 10 GiB)
    always_profile
                an auto/fastflow job profiles however short it is (False =
                $SLUICE_ALWAYS_PROFILE=1, else a job too short to repay
                profiling starts on off or all, whichever is estimated
                faster; docs/planner.md "The short-job guard")

    ``spec`` as a dict goes to the library as JSON text (no file); a value
    JSON cannot hold is a SpecError naming the field.

    Iterate once; ``batches()`` yields full ``Batch`` objects (epoch,
    indices) instead. Close it (or use ``with``) to end the job early;
    ``stats()``, ``skipped()`` and ``skipped_samples()`` still answer after
    closing (the job's final numbers). If the job runs remote work on this
    host instead (every worker refused it), a ``SluiceWarning`` says so once
    and ``stats()["fallback"]`` says why."""

    def __init__(self, dispatcher, spec, data_root=None, threads=0, offload=None, epochs=0,
                 timeout_ms=0, rank=0, world_size=0, job_name=None, consumer_rate=0.0,
                 dispatcher_timeout_ms=0, tls_ca=None, tls_cert=None, tls_key=None,
                 token_file=None, first_epoch=0, seed=None, resume=None, plugin_dir=None,
                 job_secret=None, remote_roots=None, cache_dir=None, cache_bytes=0,
                 always_profile=False):
        self._job = None
        if job_secret is None:
            job_secret = shared_job_secret(world_size)  # torch.distributed: rank 0's
        self._final = None
        self._args = dict(dispatcher=dispatcher, spec=spec, data_root=data_root,
                          threads=threads, offload=offload, epochs=epochs,
                          timeout_ms=timeout_ms, rank=rank, world_size=world_size,
                          job_name=job_name, consumer_rate=consumer_rate,
                          dispatcher_timeout_ms=dispatcher_timeout_ms, tls_ca=tls_ca,
                          tls_cert=tls_cert, tls_key=tls_key, token_file=token_file,
                          first_epoch=first_epoch, seed=seed, plugin_dir=plugin_dir,
                          job_secret=job_secret, remote_roots=remote_roots,
                          cache_dir=cache_dir, cache_bytes=cache_bytes,
                          always_profile=always_profile)
        lib = _load()
        handle, self._keep = _open(lib, self._args, resume, describe=False)
        self._info = _describe_job(lib, handle)
        mix = self._info["mix"]
        self._mix_counts = None if mix is None else np.zeros(len(mix["names"]), np.uint64)
        self._mix_ends = None if mix is None else np.asarray(mix["ends"], np.uint64)
        self._lib = lib
        self._job = _Job(lib, handle)
        self._warn_secret()
        self._done = False
        # Only a dispatcher can hand remote work back; local jobs never warn.
        self._warned = dispatcher is None
        self._st = _Stats()
        if dispatcher is not None:
            self._warn_local()

    # -- what the job delivers

    def __len__(self):
        """The batches iterating this job to its end delivers: this rank's
        batches per epoch times the job's epochs (fewer for an epoch a
        resume continues; fewer when samples are skipped)."""
        return self._info["batches"]

    @property
    def samples_per_epoch(self):
        """This rank's samples of one epoch: its DistributedSampler share
        (rank_padding "drop": floor(n / world_size), "pad": ceil), less
        drop_last's remainder."""
        return self._info["samples_per_epoch"]

    @property
    def batches_per_epoch(self):
        """This rank's batches of one epoch (ceil(samples / batch_size), floor
        with drop_last); for balanced batching, microbatches."""
        return self._info["batches_per_epoch"]

    @property
    def classes(self):
        """An imagefolder's class names in label order (torchvision's
        ImageFolder.classes); None for sources whose labels have no names."""
        c = self._info["classes"]
        return None if c is None else list(c)

    @property
    def class_to_idx(self):
        """{class name: label} (torchvision's ImageFolder.class_to_idx), or None."""
        c = self._info["class_to_idx"]
        return None if c is None else dict(c)

    # -- iteration

    def __iter__(self):
        return self

    def __next__(self):
        b = self.next_batch()
        if b is None:
            raise StopIteration
        if isinstance(b, RecordBatch):
            return b  # a multimodal batch is its own object, not (images, labels)
        return b.images, b.labels

    def batches(self):
        """Yields Batch objects until every epoch has been delivered."""
        while True:
            b = self.next_batch()
            if b is None:
                return
            yield b

    def next_batch(self):
        """The next Batch, or None after the last epoch."""
        job = self._job
        if job is None or job.handle is None:
            raise SluiceError("the loader is closed", -errno.EBADF)
        if self._done:
            return None
        job.flush()
        bptr = ctypes.POINTER(_Batch)()
        rc = self._lib.sluice_next_batch(job.handle, ctypes.byref(bptr))
        if rc == 1:
            self._done = True
            return None
        if rc < 0:
            msg = self._lib.sluice_last_error(job.handle)
            raise SluiceError(msg.decode(errors="replace") if msg else os.strerror(-rc), rc)
        if not self._warned:
            self._warn_fallback()
        return self._wrap(job, bptr)

    def _warn_secret(self):
        """A multi-rank job anyone who knows its name can join: say so
        (a SluiceWarning, on stderr by default)."""
        if not hasattr(self._lib, "sluice_secret_warning"):
            return
        w = self._lib.sluice_secret_warning(self._job.handle)
        if w:
            warnings.warn(SluiceWarning("sluice: " + w.decode(errors="replace")), stacklevel=3)

    def _warn_local(self):
        """An auto plan that keeps everything in this process says why, once,
        as the job starts (the dispatcher's planner gives the reason)."""
        buf = ctypes.create_string_buffer(256)
        if self._lib.sluice_local_reason(self._job.handle, buf, len(buf)) > 0:
            warnings.warn("sluice: the plan keeps all the work in this process: %s"
                          % buf.value.decode(errors="replace"), SluiceWarning, stacklevel=3)

    def _warn_fallback(self):
        """Says once that the job's remote work runs here, and why. Per
        batch until then: one library call into a kept struct, no dict."""
        self._lib.sluice_get_stats(self._job.handle, ctypes.byref(self._st))
        if self._st.fallback:
            self._warned = True
            why = self._st.fallback.decode(errors="replace")
            warnings.warn("sluice: the job's remote work runs in this process: %s" % why,
                          SluiceWarning, stacklevel=3)

    def _wrap(self, job, bptr):
        b = bptr.contents
        n = b.n
        labels = np.ctypeslib.as_array(b.labels, (n,)).copy() if n else np.empty(0, np.int32)
        indices = np.ctypeslib.as_array(b.indices, (n,)).copy() if n else np.empty(0, np.uint64)
        dtype = _DTYPES.get(b.dtype, np.dtype(np.uint8))
        norm = (tuple(b.norm_mean), tuple(b.norm_std)) if b.norm_on_device else None
        soft, mix = _mix_of(b)
        erase = _erase_of(b)
        if self._mix_counts is not None and n:
            self._count_sources(indices)
        with job.lock:
            job.live += 1
        if b.nbytes == 0 or not b.data:
            # Nothing to view: hand the batch back at once.
            job.release(bptr)
            empty = np.empty((0,), dtype)
            images = empty.reshape((0, b.h, b.w, b.c)) if b.uniform else [empty] * n
            return Batch(b.epoch, images, labels, indices, b.layout, norm, soft, mix, erase)
        owner = _Owner(job, bptr, b.data, b.nbytes)
        raw = np.asarray(owner)
        if b.dtype == _DT_RECORD:
            return _record_batch(self._lib, job, bptr, owner, raw, labels, indices, norm)
        if b.uniform:
            if b.layout == _LAYOUT_CHW:
                shape = (n, b.c, b.h, b.w)
            else:
                shape = (n, b.h, b.w, b.c)
            count = n * b.h * b.w * b.c
            images = raw[: count * dtype.itemsize].view(dtype).reshape(shape)
        else:
            offs = np.ctypeslib.as_array(b.offsets, (n,))
            sizes = np.ctypeslib.as_array(b.sizes, (n,))
            images = []
            for k in range(n):
                o, s = int(offs[k]), int(sizes[k])
                piece = raw[o:o + s]
                images.append(piece.view(dtype) if s % dtype.itemsize == 0 else piece)
        return Batch(b.epoch, images, labels, indices, b.layout, norm, soft, mix, erase)

    def _count_sources(self, indices):
        """Adds a batch's samples to their sources' counts (stats()["mix"])."""
        ends = self._mix_ends
        src = np.searchsorted(ends, indices, side="right")
        self._mix_counts += np.bincount(src, minlength=len(ends))[: len(ends)].astype(np.uint64)

    def report_step(self, seconds):
        """The training step that consumed the batches taken since the last
        call took ``seconds``: fits the trainer model of balanced batching
        (``stats()``: trainer_steps, trainer_fitted, trainer_coef [per token,
        per token^2, per tile, per sample], trainer_error)."""
        rc = self._lib.sluice_report_step(self._job.handle, float(seconds))
        if rc < 0:
            raise SluiceError("report_step: %r is not a step time in seconds" % (seconds,), rc)

    # -- resume

    def state(self):
        """This rank's position now -- what the batches handed out so far
        consumed -- as bytes (a few KB) to keep with a model checkpoint;
        signed with the cluster token when token_file is given. Resume with
        ``Loader(..., resume=[every rank's state])``."""
        job = self._job
        if job is None or job.handle is None:
            raise SluiceError("the loader is closed", -errno.EBADF)
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        rc = self._lib.sluice_state_save(job.handle, ctypes.byref(out), ctypes.byref(n))
        if rc < 0:
            msg = self._lib.sluice_last_error(job.handle)
            raise SluiceError(msg.decode(errors="replace") if msg else os.strerror(-rc), rc)
        try:
            return ctypes.string_at(out.value, n.value)
        finally:
            self._lib.sluice_state_free(out)

    def state_dict(self):
        """``{"sluice_states": [this rank's state()]}`` (torch.save-able)."""
        return {"sluice_states": [self.state()]}

    def load_state_dict(self, state_dict):
        """Restarts the job from saved states (a state_dict, a state, or a
        list of every rank's states): closes the current job and opens one
        with the same arguments that delivers what they did not consume."""
        states = _states_of(state_dict)
        if not states:
            raise SpecError("load_state_dict: no sluice state in %r" % (type(state_dict),),
                            -errno.EINVAL)
        self.close()
        self._final = None
        self.__init__(resume=states, **self._args)

    # -- information

    def _handle(self):
        """The open job's handle, or None after close (the final numbers
        answer then)."""
        job = self._job
        if job is not None and job.handle is not None:
            return job.handle
        if self._final is None:
            raise SluiceError("the loader is closed", -errno.EBADF)
        return None

    def stats(self):
        """Counters of the job so far (delivered, skipped, plan, first_epoch,
        epochs; fallback: why remote work runs here, "" when it does not)."""
        h = self._handle()
        if h is None:
            return dict(self._final[0])
        st = _Stats()
        self._lib.sluice_get_stats(h, ctypes.byref(st))
        out = {name: getattr(st, name) for name, _ in _Stats._fields_ if name != "_reserved"}
        out["trainer_coef"] = list(st.trainer_coef)
        for name in ("plan_mode", "plan_binding", "sample_costs", "fallback", "guard_choice",
                     "guard_reason"):
            out[name] = out[name].decode(errors="replace")
        mix = self._info["mix"]
        if mix is not None:
            # As `sluice run --json`'s "mix": the samples this consumer was
            # handed from each source and their share of all it was handed.
            total = int(self._mix_counts.sum())
            out["mix"] = {"sources": [{"name": name, "weight_share": w, "samples": int(c),
                                       "share": int(c) / total if total else 0.0}
                                      for name, w, c in zip(mix["names"],
                                                            mix["weight_shares"],
                                                            self._mix_counts)],
                          "samples_per_epoch": mix["samples_per_epoch"]}
        return out

    def skipped(self):
        """Skipped samples by reason, e.g. {"corrupt": 2}."""
        h = self._handle()
        if h is None:
            return dict(self._final[1])
        m = max(1, self._lib.sluice_skip_counts(h, None, None, 0))
        names = (ctypes.c_char_p * m)()
        counts = (ctypes.c_uint64 * m)()
        n = self._lib.sluice_skip_counts(h, names, counts, m)
        return {names[i].decode(): counts[i] for i in range(max(0, n)) if counts[i]}

    def skipped_samples(self):
        """The most recent skipped samples (up to 64), oldest first: dicts with
        epoch, index, reason, path (under the data root) and detail."""
        h = self._handle()
        if h is None:
            return [dict(d) for d in self._final[2]]
        arr = (_Skip * _RECENT_SKIPS)()
        n = self._lib.sluice_recent_skips(h, arr, _RECENT_SKIPS)
        return [{"epoch": k.epoch, "index": k.index,
                 "reason": k.reason.decode(errors="replace"),
                 "path": k.path.decode(errors="replace"),
                 "detail": k.detail.decode(errors="replace")} for k in arr[:max(0, n)]]

    # -- closing

    def close(self):
        """Ends the job (tells the dispatcher). Arrays already handed out stay
        valid; the job's memory goes when the last of them does. stats(),
        skipped() and skipped_samples() keep answering with the final
        numbers."""
        job = self._job
        if job is not None and job.handle is not None:
            self._final = (self.stats(), self.skipped(), self.skipped_samples())
        self._job = None
        if job is not None:
            job.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _states_of(resume):
    """Saved states as a list of bytes: from None, one state (bytes/str), a
    list of them, or a state_dict ({"sluice_states": [...]}, also nested
    lists of those, as gathered from every rank)."""
    if resume is None:
        return []
    if isinstance(resume, dict):
        if "sluice_states" not in resume:
            raise SpecError("resume: a state_dict without \"sluice_states\"", -errno.EINVAL)
        return _states_of(resume["sluice_states"])
    if isinstance(resume, str):
        return [resume.encode()]
    if isinstance(resume, (bytes, bytearray, memoryview)):
        return [bytes(resume)]
    if isinstance(resume, (list, tuple)):
        out = []
        for r in resume:
            out.extend(_states_of(r))
        return out
    raise SpecError("resume: %r is not a saved state (bytes) or a list of them"
                    % (type(resume),), -errno.EINVAL)


def __getattr__(name):
    # `sluice.torch` without importing torch for everyone who does not use it.
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    # The library's own version (sluice_version()), loaded on first use.
    if name == "version":
        global version
        version = _load().sluice_version().decode()
        return version
    raise AttributeError("module 'sluice' has no attribute %r" % name)
