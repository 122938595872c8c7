"""A saved policy's description as plain JSON: its network's size and its spaces.

SB3 saves what rebuilds a policy as pickles (the constructor's arguments, the spaces, the
policy's class), and reading a pickle runs whatever code its author put in it. A policy folder
says the same in JSON instead, which names no class or function: the network's size
(``NetworkSize``'s fields, each bounded, so a file cannot ask for a network that fills memory)
and the observation and action spaces (the few kinds a policy here acts on). Nothing read here
is ever imported or called.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

import numpy as np
from gymnasium import spaces

from env.common.errors import DataError

MAX_WIDTH = 16_384
"""The widest layer a saved network may ask for (the pipeline's widest is 512)."""
MAX_LAYERS = 16
"""The most layers a saved network's size may list."""
MAX_SPACE_KEYS = 64
MAX_SPACE_DIMS = 8
MAX_SPACE_ELEMENTS = 2**26
"""A saved space's bounds: an observation of 64 million values is no frame a game gives."""


class PolicyFileError(DataError):
    """A policy folder's description that cannot be read as one; the message names the file."""


def size_to_json(size: Any) -> dict[str, Any]:
    """A ``NetworkSize`` (any of its fields, as they are declared) as JSON values."""
    return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(size).items()}


def size_from_json(data: Any, kind: type, where: str) -> Any:
    """The ``kind`` (``NetworkSize``) ``data`` describes; a field it lacks keeps its default (a
    size saved before the field existed), an unknown one or one out of bounds is refused."""
    if not isinstance(data, dict):
        raise PolicyFileError(f"{where}: network must be a mapping of sizes, got {data!r}")
    known = {f.name: f for f in fields(kind)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise PolicyFileError(
            f"{where}: network has fields this version does not know ({', '.join(unknown)}): it was saved by "
            "another version of elden-il; use that version, or retrain the policy"
        )
    defaults = kind()
    values = {}
    for name, value in data.items():
        default = getattr(defaults, name)
        values[name] = _checked_size(name, value, default, where)
    return kind(**values)


def _checked_size(name: str, value: Any, default: Any, where: str) -> Any:
    def width(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_WIDTH

    if isinstance(default, tuple):
        if isinstance(value, list) and len(value) <= MAX_LAYERS and all(width(v) for v in value):
            return tuple(value)
    elif isinstance(default, bool) or not isinstance(default, int):
        if type(value) is type(default):
            return value
    elif width(value):
        return value
    raise PolicyFileError(
        f"{where}: network {name} = {value!r} is no size this network takes (whole numbers from 1 to "
        f"{MAX_WIDTH}, at most {MAX_LAYERS} of them where it lists layers): the file is damaged or not a policy's"
    )


def space_to_json(space: spaces.Space) -> dict[str, Any]:
    """``space`` as JSON: a Dict of Box, Discrete, MultiBinary and MultiDiscrete spaces, or one of those."""
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {key: space_to_json(sub) for key, sub in space.spaces.items()}}
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": space.dtype.name,
            "low": _bound(space.low),
            "high": _bound(space.high),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist()}
    raise TypeError(f"a policy's space cannot be {space}")


def _bound(values: np.ndarray) -> Any:
    """A Box's bound: one number where every element has it (a frame's 0 and 255), else all of them."""
    flat = values.ravel()
    if flat.size and (flat == flat[0]).all():
        return _number(flat[0])
    return [_number(v) for v in flat]


def _number(v: Any) -> Any:
    v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return "inf" if v > 0 else "-inf" if v < 0 else "nan"
    return v


DTYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "bool")


def space_from_json(data: Any, where: str, depth: int = 0) -> spaces.Space:
    """The space ``data`` describes (``space_to_json``'s output), bounded; ``PolicyFileError``
    naming ``where`` for anything else."""
    try:
        return _space(data, depth)
    except (TypeError, ValueError, KeyError, OverflowError) as e:
        raise PolicyFileError(
            f"{where}: not a space this project saves ({e}): the file is damaged or not a policy's"
        ) from None


def _space(data: Any, depth: int) -> spaces.Space:
    if not isinstance(data, dict):
        raise TypeError(f"{data!r} is no space")
    kind = data.get("type")
    if kind == "Dict" and depth == 0:
        subspaces = data["spaces"]
        if not isinstance(subspaces, dict) or len(subspaces) > MAX_SPACE_KEYS:
            raise ValueError(f"a Dict space holds a mapping of at most {MAX_SPACE_KEYS} spaces")
        return spaces.Dict({str(key): _space(sub, depth + 1) for key, sub in subspaces.items()})
    if kind == "Box":
        shape = tuple(_count(v, MAX_SPACE_ELEMENTS) for v in data["shape"])
        if len(shape) > MAX_SPACE_DIMS or int(np.prod(shape, dtype=np.int64)) > MAX_SPACE_ELEMENTS:
            raise ValueError(f"a Box of shape {shape} is larger than any observation")
        dtype = data["dtype"]
        if dtype not in DTYPES:
            raise ValueError(f"dtype {dtype!r}")
        elements = int(np.prod(shape, dtype=np.int64))
        low, high = (_bound_from(data[k], shape, elements, np.dtype(dtype)) for k in ("low", "high"))
        return spaces.Box(low, high, shape, np.dtype(dtype))
    if kind == "Discrete":
        return spaces.Discrete(_count(data["n"], MAX_SPACE_ELEMENTS), start=int(data.get("start", 0)))
    if kind == "MultiBinary":
        return spaces.MultiBinary(_count(data["n"], MAX_SPACE_ELEMENTS))
    if kind == "MultiDiscrete":
        nvec = data["nvec"]
        if not isinstance(nvec, list) or not 0 < len(nvec) <= MAX_SPACE_KEYS:
            raise ValueError("nvec must list the choices of each part")
        return spaces.MultiDiscrete([_count(v, MAX_SPACE_ELEMENTS) for v in nvec])
    raise ValueError(f"type {kind!r}")


def _count(v: Any, most: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= most:
        raise ValueError(f"{v!r} is not a whole number from 1 to {most}")
    return v


def _bound_from(value: Any, shape: tuple[int, ...], elements: int, dtype: np.dtype) -> np.ndarray:
    if isinstance(value, list):
        if len(value) != elements:
            raise ValueError(f"a bound of {len(value)} values for a Box of {elements}")
        return np.array([float(v) for v in value]).astype(dtype).reshape(shape)
    return np.full(shape, float(value)).astype(dtype)
