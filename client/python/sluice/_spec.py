"""A spec given as a dict, as the JSON text libsluice parses (sluice_open_json).

No temporary file: the text goes to the library directly. What JSON cannot
say (a set, an object, NaN, a key that is not a string) is refused here with
the field named as the library names fields (``stages[1].size``), so both
kinds of error read alike. numpy scalars and arrays are taken as the numbers
and lists they hold.
"""

import json
import math
import numbers

import numpy as np


def _convert(value, path):
    """value as plain JSON types; raises ValueError naming path."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.ndarray):
        return [_convert(v, "%s[%d]" % (path, i)) for i, v in enumerate(value.tolist())]
    if isinstance(value, np.generic):
        value = value.item()
        if not isinstance(value, (bool, int, float, str)):
            raise ValueError("%s: type %s is not a JSON value" % (path, type(value).__name__))
        return _convert(value, path)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            raise ValueError("%s: %r is not a finite number" % (path, f))
        return f
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError("%s: key %r is not a string" % (path or "spec", k))
            out[k] = _convert(v, "%s.%s" % (path, k) if path else k)
        return out
    if isinstance(value, (list, tuple)):
        return [_convert(v, "%s[%d]" % (path, i)) for i, v in enumerate(value)]
    raise ValueError("%s: type %s is not a JSON value" % (path or "spec", type(value).__name__))


def to_json(spec):
    """The spec dict as UTF-8 JSON text; ValueError names the offending field."""
    return json.dumps(_convert(spec, ""), allow_nan=False).encode("utf-8")
