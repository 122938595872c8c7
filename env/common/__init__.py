"""What every layer shares, and nothing of the game: the error catalogue (``errors``), the rules a
setting's field declares (``fields``), the command-line runner and flags (``cli``) and the
handling of Ctrl-C and SIGTERM (``interrupts``). It imports nothing else of the project, so
``env``, ``capture`` and ``elden_il`` all import it without an import reaching up."""
