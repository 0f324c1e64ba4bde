"""Reading a stored corpus back: ``verify`` (``verification``: the chain, the digests, the
records recomputed), ``validate`` (``validation``: every execution in tiers) and ``stats``
(``stats``: counts and issues; ``results``, ``units``, ``intervals``, ``compare``: the results
table and ``--compare``).

May import: ``evidence``, ``corpus``, ``live`` (the caps' accounting), ``base``, ``errors``.
"""
