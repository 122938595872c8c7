"""A clear error when another ``env`` module hides this project's ``env`` package.

``env`` is a common name: a user's own ``env.py`` (or ``env/``) in the working directory comes
first on ``sys.path`` for ``python -m``, scripts and notebooks, and every import of ours then
fails far from the cause (``'env' is not a package``, or Gymnasium's ``NamespaceNotFound``
because the id was never registered). ``elden_il`` and ``capture`` check this first when
imported. Console scripts (``elden-sim``...) do not put the working directory on ``sys.path``,
so they are immune.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

OUR_ENV = Path(__file__).resolve().parent.parent / "env" / "__init__.py"


class ShadowedPackageError(ImportError):
    """Another ``env`` module hides ours. An ``ImportError`` (it is raised while importing, and
    ``env.common.errors.EldenILError`` cannot be imported when ``env`` is not ours); the message says
    which file and what to do."""


def check_env_package() -> None:
    """Raise ``ShadowedPackageError`` if ``import env`` would not import this project's env."""
    try:
        spec = importlib.util.find_spec("env")
    except (ImportError, ValueError):  # a broken module under that name: also not ours
        spec = None
    origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
    if origin == OUR_ENV:
        return
    where = f"{origin}" if origin else "a namespace package or a broken module called 'env'"
    raise ShadowedPackageError(
        f"{where} shadows elden-il's 'env' package ({OUR_ENV.parent}): rename your env module "
        "or run from another directory (the console scripts, e.g. elden-sim, are not affected)"
    )
