"""Recording human (or autopilot) play into crash-safe episodes, and building Minari datasets from them."""

from capture.shadowing import check_env_package

check_env_package()
