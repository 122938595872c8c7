"""What every layer shares, and nothing of the game: the error catalogue (``errors``), the rules a
setting's field declares (``fields``), the command-line runner and flags (``cli``), the handling
of Ctrl-C and SIGTERM (``interrupts``), files read within bounds (``files``), outputs published
whole (``staging``) and the OS locks they take (``lock``), progress bars (``progress``), and the
description of the machine a measurement ran on (``machine``). It imports nothing else of the
project, so ``env``, ``capture`` and ``elden_il`` all import it without an import reaching up."""
