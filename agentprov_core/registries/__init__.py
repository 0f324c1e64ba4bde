"""The tables a maintainer edits in ``registry/``: the defence registry and the rules T0
applies to ``--defence`` (``defences``), the parts table of ``agentprov info``
(``parts``), their tables checked field by field (``fields``), and the overlay in
``$AGENTPROV_HOME/registry/`` that the toggles write (``overlay``, ``edit``).

May import: ``base``, ``catalogue``, ``errors``.
"""
