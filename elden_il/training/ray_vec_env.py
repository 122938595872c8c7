"""Envs that live in Ray actors, anywhere on the cluster ``RAY_ADDRESS`` names: in-process
simulators, simulator servers, or clients of Siphon hosts. ``RayVecEnv`` is a Stable-Baselines3
vector env of them, which PPO takes as any ``VecEnv``; ``RayEnv`` is one of them as a Gymnasium
env, which AWAC's actor for one gaming PC steps (``elden_il.training.awac``).

Each of ``RayVecEnv``'s actors runs SB3's own sub-process worker loop (``SubprocVecEnv``'s
``_worker``) on a pipe inside the actor, and ``RayVecEnv`` is ``SubprocVecEnv`` with the pipes
replaced by actor calls:
stepping, auto-reset, terminal observations, seeds and attribute access are SB3's code, so the
rollouts are those of the local vector envs for the same seeds.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from stable_baselines3.common.vec_env import SubprocVecEnv
from stable_baselines3.common.vec_env.base_vec_env import CloudpickleWrapper, VecEnv
from stable_baselines3.common.vec_env.subproc_vec_env import _worker

from env.common.errors import GameError

from elden_il.fanout import connect


class _EnvHost:
    """One sub-env in a Ray actor, behind SB3's worker loop on a pipe (a thread of the actor)."""

    def __init__(self, env_fn: Callable[[], gym.Env]) -> None:
        self.pipe, worker_end = mp.Pipe()
        spare, _ = mp.Pipe()  # _worker closes its "parent end": in a sub-process, its copy of ours
        self.worker = threading.Thread(
            target=_worker, args=(worker_end, spare, CloudpickleWrapper(env_fn)), daemon=True
        )
        self.worker.start()

    def call(self, message: tuple[str, Any]) -> Any:
        self.pipe.send(message)
        return self.pipe.recv()

    def close(self) -> None:
        self.pipe.send(("close", None))
        self.worker.join()


class _ActorPipe:
    """A pipe's ``send``/``recv`` over one ``_EnvHost`` actor: ``send`` starts the call,
    ``recv`` waits for its answer, so all sub-envs step at once."""

    def __init__(self, ray: Any, actor: Any) -> None:
        self.ray = ray
        self.actor = actor
        self.pending: Any = None

    def send(self, message: tuple[str, Any]) -> None:
        if message[0] == "close":
            self.ray.get(self.actor.close.remote())
            self.ray.kill(self.actor)
        else:
            self.pending = self.actor.call.remote(message)

    def recv(self) -> Any:
        answer, self.pending = self.ray.get(self.pending), None
        return answer

    def close(self) -> None:
        """Nothing to release: the actor is gone with ``send(("close", None))``."""


class RayVecEnv(SubprocVecEnv):
    """``SubprocVecEnv`` with each sub-env in a Ray actor of ``cpus`` CPUs on the cluster
    ``RAY_ADDRESS`` names (``elden_il.fanout.connect``)."""

    def __init__(self, env_fns: list[Callable[[], gym.Env]], cpus: float = 1.0) -> None:
        ray = connect()
        host = ray.remote(num_cpus=cpus)(_EnvHost)
        self.waiting = False
        self.closed = False
        self.processes: list = []  # SubprocVecEnv.close joins these: the actors end in close()
        self.remotes = [_ActorPipe(ray, host.remote(fn)) for fn in env_fns]
        self.remotes[0].send(("get_spaces", None))
        observation_space, action_space = self.remotes[0].recv()
        VecEnv.__init__(self, len(env_fns), observation_space, action_space)


class _OneEnv:
    """One env in a Ray actor, as Gymnasium calls it. Made by ``open``, not with the actor: what
    making it raises (no game at the host) then comes back as a task's error, the exception itself."""

    def __init__(self, env_fn: Callable[[], gym.Env]) -> None:
        self.env_fn = env_fn

    def open(self) -> tuple[gym.Space, gym.Space]:
        self.env = self.env_fn()
        return self.env.observation_space, self.env.action_space

    def reset(self, seed: int | None, options: dict | None) -> tuple:
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple:
        return self.env.step(action)

    def state(self) -> Any:
        return self.env.unwrapped.state

    def close(self) -> None:
        self.env.close()


class RayEnv(gym.Env):
    """The env ``env_fn`` makes, made and stepped in a Ray actor of ``cpus`` CPUs on the cluster
    ``RAY_ADDRESS`` names (``elden_il.fanout.connect``): next to the game it plays, wherever that
    is. Its game's state (``state``, which the scripted interventions read) comes from there too.
    What the env raises there is raised here as itself, and an actor gone with its node is a
    ``GameError``: a lost game reads the same either way."""

    def __init__(self, env_fn: Callable[[], gym.Env], cpus: float = 1.0) -> None:
        self._ray = connect()
        self._actor = self._ray.remote(num_cpus=cpus)(_OneEnv).remote(env_fn)
        try:
            self.observation_space, self.action_space = self._call("open")
        except BaseException:
            self._ray.kill(self._actor)  # its CPU back to the cluster
            raise

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return self._ray.get(getattr(self._actor, method).remote(*args))
        except self._ray.exceptions.RayTaskError as e:
            raise e.cause from None
        except self._ray.exceptions.RayActorError as e:
            raise GameError(f"the Ray actor that played this env is gone ({type(e).__name__})") from None

    @property
    def state(self) -> Any:
        return self._call("state")

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        return self._call("reset", seed, options)

    def step(self, action: Any) -> tuple:
        return self._call("step", action)

    def close(self) -> None:
        try:
            self._call("close")
        finally:
            self._ray.kill(self._actor)
