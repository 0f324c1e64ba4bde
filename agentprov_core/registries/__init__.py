"""The tables a maintainer edits in ``registry/``: the defence registry and the rules T0
applies to ``--defence`` (``defences``), the parts table of ``agentprov info``
(``parts``), and toggling an entry in place with its comments kept (``edit``).

May import: ``base``, ``catalogue``, ``errors``.
"""
