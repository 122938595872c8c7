"""The Rerun viewer of fights, and the command that opens it (``python -m elden_il.view``): a raw
episode (``episode``), a dataset episode or an evaluation's fight all become the same steps
(``steps``), logged the one way ``viewer``, the only module that imports Rerun, logs them.
"""
