"""Vector envs: the way a user scales past one game.

One helper, three sources of games:

* ``backend="sim"``: N in-process simulators (lock-step; fastest for RL on one machine);
* ``backend="sim_servers"``: N ``python -m env.sim`` servers it starts and stops itself, each
  env talking gRPC exactly as to the real game (the live path, parallel in real time);
* ``backend="siphon"`` with ``hosts=[...]``: one env per Siphon server, one per gaming PC.

Real-time envs run in subprocesses (Gymnasium's ``AsyncVectorEnv``) so their waits overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import gymnasium as gym

from env.elden_env import EldenRingEnv
from env.sim.launcher import SimServer


class _StopsServers(gym.vector.VectorWrapper):
    """Closing the vector env also stops the servers it started."""

    def __init__(self, env: gym.vector.VectorEnv, servers: list[SimServer]) -> None:
        super().__init__(env)
        self.servers = servers

    def close(self, **kwargs: Any) -> None:
        try:
            super().close(**kwargs)
        finally:
            for server in self.servers:
                server.stop()


def make_vector_env(
    num_envs: int | None = None,
    backend: str = "sim",
    hosts: Sequence[str] = (),
    asynchronous: bool | None = None,
    seed: int = 0,
    **env_kwargs: Any,
) -> gym.vector.VectorEnv:
    """Build a vector of ``EldenRingEnv``; ``env_kwargs`` go to every env (action_mode,
    timestep_ms, frame_stack, ...). ``seed`` starts simulator server ``i`` on ``seed + i``
    (``sim_servers``); fights are seeded as usual by ``envs.reset(seed=s)``, env ``i`` with ``s + i``."""
    servers: list[SimServer] = []
    if backend == "sim":
        if not num_envs:
            raise ValueError("backend='sim' needs num_envs")
        fns = [partial(EldenRingEnv, backend="sim", **env_kwargs) for _ in range(num_envs)]
        asynchronous = bool(asynchronous)
    elif backend == "sim_servers":
        if not num_envs:
            raise ValueError("backend='sim_servers' needs num_envs")
        size = tuple(env_kwargs.get("frame_size", (84, 84)))
        servers = [SimServer(seed=seed + i, size=size) for i in range(num_envs)]
        hosts = [s.host for s in servers]
        fns = [partial(EldenRingEnv, backend="siphon", host=h, profile="sim_margit", **env_kwargs) for h in hosts]
        asynchronous = True if asynchronous is None else asynchronous
    elif backend == "siphon":
        if not hosts:
            raise ValueError("backend='siphon' needs hosts=['pc1:50051', ...], one per Siphon server")
        fns = [partial(EldenRingEnv, backend="siphon", host=h, **env_kwargs) for h in hosts]
        asynchronous = True if asynchronous is None else asynchronous
    else:
        raise ValueError(f"unknown backend {backend!r}: use 'sim', 'sim_servers' or 'siphon'")
    try:
        vector_cls = gym.vector.AsyncVectorEnv if asynchronous else gym.vector.SyncVectorEnv
        envs = vector_cls(fns)
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return _StopsServers(envs, servers) if servers else envs
