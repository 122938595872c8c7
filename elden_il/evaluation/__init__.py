"""Judging policies: fights played for seeds, in-process or over the live path (``fight_loop``),
the evaluate stage that plays every policy on the same held-out seeds (``evaluate``), a win
rate's interval (``win_rate``), who recorded the dataset and how often they won (``teacher``),
and the stage's plots (``plots``).
"""
