"""Everything that touches a live game: the Siphon client, the Game interface, profiles, the env
and the simulator that stands in for Elden Ring when there is no game."""
