"""Per-game, per-boss data: Siphon configs, keybinds, discrete action tables, animation vocabularies."""
