"""Fine-tuning's schedules do what their settings say, in a real (tiny) PPO run."""

from __future__ import annotations

from pathlib import Path

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.policies import ActorCriticPolicy

from elden_il.finetune import FinetuneConfig, actor_parameters, finetune
from elden_il.policy import make_policy
from env.config import EnvConfig
from env.profile import load_profile


def test_the_critic_warms_up_alone_with_its_own_passes_and_the_kl_pull_decays_to_nothing(tmp_path: Path):
    config = EnvConfig(profile="sim_margit", action_history=4, max_steps=20)
    make_policy(*config.spaces(load_profile("sim_margit"))).save(str(tmp_path / "bc.zip"))
    settings = FinetuneConfig(total_steps=64, num_envs=1, subprocesses=False, n_steps=32, batch_size=32, n_epochs=2,
                              learning_rate=1e-3, kl_coef=0.05, kl_decay_steps=32, value_warmup_steps=64,
                              value_warmup_epochs=3)
    finetune(tmp_path / "bc.zip", settings, config, tmp_path / "out")

    bc = ActorCriticPolicy.load(str(tmp_path / "bc.zip"))
    model = PPO.load(tmp_path / "out" / "policy.zip")
    assert model.ent_coef == 0.0  # 0.05 at the start, none left from step 32 on
    assert model._n_updates == 2 * 3 and model.n_epochs == 2  # two rollouts of 3 warm-up passes; PPO's own kept
    actor = {id(p) for p in actor_parameters(model.policy)}
    names = dict(model.policy.named_parameters())
    bc_params = dict(bc.named_parameters())
    frozen = [n for n, p in names.items() if id(p) in actor]
    learned = [n for n in names if n not in frozen]
    assert frozen and learned
    assert all(torch.equal(names[n], bc_params[n]) for n in frozen), "the actor moved during the warm-up"
    assert any(not torch.equal(names[n], bc_params[n]) for n in learned), "the critic did not learn"
