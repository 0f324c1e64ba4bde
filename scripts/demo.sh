#!/usr/bin/env bash
# The README's main job: what this build does with AgentDojo, end to end, without a model
# or a key. Every step is a real command; its exit code is shown.
set -uo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export AGENTPROV_HOME="$work/home"
echo '[]' > "$work/script.json"
step() { echo; echo "\$ agentprov $*"; agentprov "$@"; echo "[exit $?]"; }

step info
echo; echo "\$ agentprov run agentdojo --catalogue   (summary)"
agentprov run agentdojo --catalogue | python3 -c '
import json, sys
d = json.load(sys.stdin); v = d["default_benchmark_version"]
s = [x for x in d["suites"] if x["benchmark_version"] == v]
print(f"agentdojo {d[\"provenance\"][\"packages\"][\"agentdojo\"]} {v}: {len(s)} suites, "
      f"{sum(len(x[\"user_tasks\"]) for x in s)} user / {sum(len(x[\"injection_tasks\"]) for x in s)} injection tasks, "
      f"{len(d[\"attacks\"])} attacks ({sum(a[\"dos\"] for a in d[\"attacks\"])} DoS), {len(d[\"defences\"])} defences")'
step run agentdojo --dry-run --corpus "$work/corpora/g" --campaign g --suite workspace \
  --defence mandate_scoped --llm-script "$work/script.json"
step run agentdojo --dry-run --corpus "$work/corpora/demo" --campaign demo --suite banking \
  --user-tasks 0-1 --attack important_instructions --injection-tasks 0 --llm-script "$work/script.json"
echo
echo "nothing was written: $(find "$work/corpora" "$AGENTPROV_HOME" 2>/dev/null | wc -l) file(s) under the corpora and home"
