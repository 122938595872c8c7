"""A trained policy as files and as a network: the network over the frame and the game state
and the one loader every command uses (``policy``: ``save_policy``, ``load_policy``), its
description as plain JSON (``policy_json``), SB3's zip in and out (``sb3_zip``, a command), the
encoder d3rlpy trains with (``d3rlpy_encoder``), and torch on one thread where a loop asks one
observation at a time (``torch_threads``).
"""
