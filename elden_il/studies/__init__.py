"""Learning studies: experiments that answer a researcher's question with win rates and their
intervals, each a command whose results STUDIES.md (beside this package) gives with the line that reproduces them.

- ``scaling``: how many fights must I record? BC on growing numbers of demonstration fights.
- ``corrections``: are a person's corrections worth more than as many more demonstrations?
- ``human_path``: does a person's recording (a window, real keys, another process) train as
  well as the pipeline's lock-step demonstrations?
- ``ablation``: which params make the default pipeline's policies strong and fast, variants run
  through the pipeline's own stages side by side.
- ``finetune_stability``: fine-tuning's learning curve under variants of its settings.

They sit above the pipeline they study and nothing of the product imports them. What a hot path
costs (steps a second, bytes on the wire) is measured in ``benchmarks/`` instead.
"""
