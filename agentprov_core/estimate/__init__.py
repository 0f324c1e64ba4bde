"""``agentprov estimate`` and ``agentprov prices``: what a plan would cost and take, before it
runs, from dated prices and per-cell statistics (docs/estimates.md)."""
