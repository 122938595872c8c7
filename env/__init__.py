"""Everything that touches a live game: the Siphon client, the Game interface, profiles, the env
and the simulator that stands in for Elden Ring when there is no game.

Importing ``env`` registers ``EldenIL/Margit-v0`` with Gymnasium::

    import gymnasium, env
    sim = gymnasium.make("EldenIL/Margit-v0")                                  # in-process simulator
    game = gymnasium.make("EldenIL/Margit-v0", backend="siphon", host="192.168.1.20:50051")
"""

import gymnasium

gymnasium.register(
    id="EldenIL/Margit-v0",
    entry_point="env.elden_env:EldenRingEnv",
    kwargs={"boss_name": "margit"},
)
