"""Everything that touches a live game: the Siphon client, the Game interface, profiles, the env
and the simulator that stands in for Elden Ring when there is no game.

Importing ``env`` registers ``EldenIL/Margit-v0`` with Gymnasium (its entry point is
``env.factory.make_env``)::

    import gymnasium, env
    sim = gymnasium.make("EldenIL/Margit-v0")                                  # in-process simulator
    live = gymnasium.make("EldenIL/Margit-v0", backend="sim_server")           # a simulator server, over gRPC
    game = gymnasium.make("EldenIL/Margit-v0", backend="siphon", host="192.168.1.20:50051")
"""

import gymnasium

gymnasium.register(id="EldenIL/Margit-v0", entry_point="env.factory:make_env")
