"""agentprov's library for Inspect worker packages, inside a backend environment.

What any Inspect task needs on the worker side: its catalogue read from the installed code
(:mod:`agentprov_inspect.taskcode`: a task function's parameters, their types, choices and
defaults, and the settings the task fixes, read with :mod:`ast` without importing Inspect),
the dataset the build copied into the environment (:mod:`agentprov_inspect.dataset`), the
plan check (:class:`agentprov_inspect.source.InspectWorkerSource`) and a cell, one
``inspect_ai.eval()`` with every model call recorded (:mod:`agentprov_inspect.cells`). A
task's own policy (which parameters are offered, their ranges, which splits, how its task
function is called) is its worker package's.

Never imports ``agentprov_core``; imports Inspect only inside a cell.
"""
