"""Training a policy: behaviour cloning from a Minari dataset (``bc``), and RL fine-tuning from
the cloned weights (``finetune``: AWAC from one env and the demonstrations, ``awac``; or PPO near
the cloned policy, over several envs, ``ray_vec_env`` on a cluster), with the steps a person
takes over while it learns (``interventions``), several runs as one policy (``finetune_runs``)
and the curves ``dvc plots`` draws (``tracking``).
"""
