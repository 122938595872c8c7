"""The Siphon backend: a game behind a Siphon gRPC server (Elden Ring on a Windows PC, or
``python -m env.sim``), as the ``Game`` protocol (``env.game``) asks for it. Siphon's attribute config (the TOML the
server is configured with) is ``env.attribute_config``: every profile holds one.

- ``packed_reads``: neighbouring attributes fetched as one array read;
- ``client``: a strict, fast client over the gRPC stubs that ship in ``pysiphon``;
- ``stream``: frames from Siphon's StreamFrames, the newest kept (``frame_source = "stream"``);
- ``game``: ``SiphonGame``, the ``Game`` protocol over that client;
- ``arena``: getting back into the boss fight after what the game does not undo (a death).

Nothing here knows the simulator: it talks to whatever Siphon server it is given.
"""
