"""``agentprov view``: a static, self-contained HTML site of one or more corpora (docs/view.md).

May import: ``audit``, ``evidence``, ``corpus``, ``live`` (the quality line), ``base``,
``errors``; nothing but the command line imports it.

``scrub`` makes whatever is shown safe to show (redaction), ``execution`` reads one
execution into the document its page renders, ``checks`` maps verify's findings to
executions, ``model`` reads the corpora into the site model, ``plot`` draws the overview's
SVG, ``pages`` renders the overview page, ``site`` writes the site, ``serve`` serves it on
loopback. The page's script and style are package data (``assets/``)."""
