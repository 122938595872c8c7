"""The one env factory: an ``EnvConfig`` and a backend name in, a ready ``EldenRingEnv`` out.

Three backends, one set of names everywhere (the recorder, the pipeline, fine-tuning,
evaluation, the docs):

* ``"sim"``: the simulator in-process, lock-step (fastest: RL training, tests);
* ``"sim_server"``: a ``python -m env.sim`` server this env starts for itself and stops on
  ``close()``, talked to over gRPC exactly as the real game is (the live path, no game needed);
* ``"siphon"``: a Siphon server at ``host``: the game on a gaming PC (or a simulator server
  someone else runs).

``make_env`` is what ``gymnasium.make("EldenIL/Margit-v0", ...)`` calls, and what a dataset's
Minari env spec rebuilds, so its keyword arguments are the config's fields plus the backend's.
``env_fns`` gives one constructor per env (in the spirit of SB3's ``make_vec_env`` and CleanRL's
``make_env`` thunks) and ``make_vector_env`` wraps them in a Gymnasium vector env.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import gymnasium as gym

from env.common.errors import ConfigError
from env.config import FIELD_NAMES, EnvConfig
from env.elden_env import EldenRingEnv
from env.game import Game
from env.profile import DEFAULT_BOSS, available_profiles

BACKENDS = ("sim", "sim_server", "siphon")
GAMES = {"sim": "sim", "sim_server": "sim", "siphon": "eldenring"}
"""Each backend's game: a config that names no profile plays that game's ``f"{game}_{boss}"``."""
DEFAULT_HOST = "127.0.0.1:50051"


def default_profile(backend: str, boss: str | None = None) -> str:
    """The bundled profile a config without one plays on ``backend`` against ``boss`` (a key,
    ``"tree_sentinel"``, or a name, ``"Tree Sentinel"``; default Margit): ``sim_godrick``,
    ``eldenring_godrick``..."""
    _check_backend(backend)
    key = (boss or DEFAULT_BOSS).strip().lower().replace(" ", "_")
    game = GAMES[backend]
    name = f"{game}_{key}"
    bundled = available_profiles()
    if name not in bundled:
        bosses = [p.removeprefix(f"{game}_") for p in bundled if p.startswith(f"{game}_")]
        raise ConfigError(
            f"backend {backend!r} has no profile for boss {boss!r} (no bundled {name}); the bosses with one: "
            f"{', '.join(bosses)}. Give one of those, or a profile of your own (profile=<its folder>)"
        )
    return name


def make_game(
    config: EnvConfig,
    backend: str = "sim",
    host: str = DEFAULT_HOST,
    seed: int = 0,
    boss_name: str | None = None,
    **server_options: Any,
) -> Game:
    """The game behind an env. ``seed`` is the simulator's first seed (``sim``, ``sim_server``);
    ``boss_name`` chooses the profile where the config names none (``default_profile``);
    ``server_options`` go to the simulator server (``sim_server``), e.g. ``size``. A simulator
    renders the config's picture (``EnvConfig.picture_size``: the recordings' window, or the
    frame size), which the env then crops and resizes as the recorder did."""
    _check_backend(backend)
    profile = config.profile or default_profile(backend, boss_name)
    if backend == "sim":
        from env.sim.game import SimGame

        return SimGame(profile, seed=seed, window_size=config.picture_size)
    if backend == "sim_server":
        from env.sim.launcher import SimServerGame

        return SimServerGame(profile, seed=seed, **{"size": config.picture_size, **server_options})
    from env.siphon.game import SiphonGame

    return SiphonGame(host, profile)


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ConfigError(
            f"unknown backend {backend!r}: use 'sim' (the simulator in-process), 'sim_server' (a simulator "
            "server of its own, over gRPC) or 'siphon' (a Siphon server at host: the game)"
        )


def make_env(
    config: EnvConfig | None = None,
    *,
    backend: str = "sim",
    host: str = DEFAULT_HOST,
    seed: int = 0,
    server_args: tuple[str, ...] = (),
    **options: Any,
) -> EldenRingEnv:
    """An env for ``config`` over ``backend``. ``options`` may set config fields one by one
    (``frame_size=(64, 48)``, as ``gymnasium.make`` passes them) and the env's own behaviour
    (``reward_fn``, ``pause_between_steps``, ``state_attributes``, ``render_mode``, ``boss_name``: which
    boss, and so which profile where the config names none);
    ``server_args``: the ``sim_server`` backend's server's flags (``("--real-server",)``)."""
    config = _with_fields(config, options)
    game = make_game(
        config,
        backend,
        host,
        seed,
        boss_name=options.get("boss_name"),
        **({"extra_args": server_args} if server_args else {}),
    )
    try:
        return EldenRingEnv(game, config, **options)
    except BaseException:
        game.close()
        raise


GAME_CHOICES = frozenset({"backend", "host", "server_args"})
"""``make_env``'s arguments that choose which game to reach and how: never a dataset's to give."""


def make_dataset_env(**options: Any) -> EldenRingEnv:
    """The env a dataset was built for, in-process: the entry point a dataset's env spec names
    (``capture.build_dataset.DATASET_ENTRY_POINT``). Minari's
    ``recover_environment()`` calls this with whatever its env spec's arguments are, and a shared
    dataset's spec could name any host: a backend, a host or a server's flags are refused in one
    line, before anything is made, so that such a spec makes no env that connects anywhere."""
    chosen = sorted(GAME_CHOICES & options.keys())
    if chosen:
        given = ", ".join(f"{name} {options[name]!r}" for name in chosen)
        raise ConfigError(
            f"this dataset's env spec passes {given}: a dataset says which env it was built for, never which game "
            "to reach or how; make the env with env.factory.make_env(elden_il.data.dataset_config(dataset), "
            "backend=...) and the backend you choose"
        )
    return make_env(**options)


def _with_fields(config: EnvConfig | None, options: dict[str, Any]) -> EnvConfig:
    """``config`` (default: the default config) with the config fields found in ``options``,
    which are taken out of it: what is left is the env's own behaviour."""
    fields = {k: options.pop(k) for k in list(options) if k in FIELD_NAMES}
    return (config or EnvConfig()).replace(**fields)


def env_fns(
    config: EnvConfig,
    backend: str = "sim",
    num_envs: int | None = None,
    hosts: Sequence[str] = (),
    seed: int = 0,
    **options: Any,
) -> list[Callable[[], EldenRingEnv]]:
    """One constructor per env: ``num_envs`` simulators (``sim``, ``sim_server``: simulator ``i``
    starts from seed ``seed + i``), or one env per Siphon host (``siphon``). Each constructor can
    run in a subprocess (SB3's ``SubprocVecEnv``, Gymnasium's ``AsyncVectorEnv``)."""
    _check_backend(backend)
    if backend == "siphon":
        if not hosts:
            raise ConfigError("backend 'siphon' needs hosts: one 'host:port' per Siphon server (gaming PC)")
        return [partial(make_env, config, backend=backend, host=host, **options) for host in hosts]
    if not num_envs or num_envs < 1:
        raise ConfigError(f"backend {backend!r} needs num_envs, how many simulators to run (at least 1)")
    return [partial(make_env, config, backend=backend, seed=seed + i, **options) for i in range(num_envs)]


def make_vector_env(
    config: EnvConfig | None = None,
    backend: str = "sim",
    num_envs: int | None = None,
    hosts: Sequence[str] = (),
    asynchronous: bool | None = None,
    seed: int = 0,
    **options: Any,
) -> gym.vector.VectorEnv:
    """A Gymnasium vector env over ``env_fns``. Real-time backends run in subprocesses by default
    (``AsyncVectorEnv``), so their waits overlap; in-process simulators in one process. Fights are
    seeded as usual by ``envs.reset(seed=s)``, env ``i`` with ``s + i``."""
    config = _with_fields(config, options)
    fns = env_fns(config, backend, num_envs, hosts, seed, **options)
    if asynchronous is None:
        asynchronous = backend != "sim"
    return (gym.vector.AsyncVectorEnv if asynchronous else gym.vector.SyncVectorEnv)(fns)
