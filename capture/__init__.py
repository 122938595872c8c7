"""Recording human (or autopilot) play into crash-safe episodes, and building Minari datasets from them."""
