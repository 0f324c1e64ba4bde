"""Summarise an agentprov-catalogue/0.1 document read on stdin (used by scripts/demo.sh)."""

import json
import sys

d = json.load(sys.stdin)
v = d["default_benchmark_version"]
suites = [s for s in d["suites"] if s["benchmark_version"] == v]
users = sum(len(s["user_tasks"]) for s in suites)
injs = sum(len(s["injection_tasks"]) for s in suites)
dos = sum(a["dos"] for a in d["attacks"])
pkg = d["provenance"]["packages"].get(d["source"], "")
print(f"served by: {d['provenance']['kind']}; {d['source']} {pkg} {v}: {len(suites)} suites, "
      f"{users} user / {injs} injection tasks, {len(d['attacks'])} attacks ({dos} DoS), "
      f"{len(d['defences'])} defences")
