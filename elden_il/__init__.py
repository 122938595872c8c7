"""Learning: demonstrations from Minari into torch, policies over frames and game state,
behaviour cloning, RL fine-tuning near the cloned policy, and evaluation in the live env.

Importing ``elden_il`` checks that ``env`` is this project's package (``capture.shadowing``)
and registers ``EldenIL/Margit-v0`` with Gymnasium (``import env`` does the same).
"""

from capture.shadowing import check_env_package

check_env_package()

import env  # noqa: E402,F401 - registers EldenIL/Margit-v0
