"""Learning: demonstrations from Minari into torch, policies over frames and game state,
behaviour cloning, RL fine-tuning near the cloned policy, and evaluation in the live env."""
