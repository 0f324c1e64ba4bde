#!/usr/bin/env bash
# The README's main job: a scripted AgentDojo campaign end to end, with no model and no key.
# It builds the real AgentDojo backend environment (agentdojo 0.1.35 from PyPI, by uv from
# the committed lock), verifies it offline, reads its catalogue through the worker, shows a
# refusal, dry-runs the plan, then runs it with the scripted transport: the first run stops
# at the attack that needs a display name (a config stop, exit 1), and the same command with
# --model-display-name resumes it to the end; then the corpus tools check what it recorded
# (validate, recompute, verify, stats), view writes it as a static site, and package refuses
# to seal it. Every step is a real command.
set -uo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export AGENTPROV_HOME=${AGENTPROV_HOME:-$HOME/.agentprov}
echo '[]' > "$work/script.json"
status=0
step() { echo; echo "\$ agentprov $*"; agentprov "$@"; rc=$?; echo "[exit $rc]"; return $rc; }

step info || status=1
step backends build agentdojo --allow-network || exit 1
step backends build agentdojo --offline-check || exit 1
echo; echo "\$ agentprov run agentdojo --catalogue   (summarised)"
agentprov run agentdojo --catalogue | python3 scripts/catalogue_summary.py || status=1
step run agentdojo --dry-run --corpus "$work/corpora/g" --campaign g --suite workspace \
  --defence mandate_scoped --llm-script "$work/script.json"
[ $? -eq 5 ] || status=1
step run agentdojo --dry-run --corpus "$work/corpora/live-demo" --campaign demo --suite banking \
  --user-tasks 0-1 --attack important_instructions --injection-tasks 0 --llm-script "$work/script.json" \
  || status=1
echo
echo "corpora written by the dry runs: $(find "$work/corpora" 2>/dev/null | wc -l) file(s) (a dry run writes nothing)"
corpus="$AGENTPROV_HOME/corpora/live-demo-$(date +%Y%m%d-%H%M%S)"
run=(run agentdojo --corpus "$corpus" --campaign demo --suite banking --user-tasks 0-1
     --attack important_instructions --injection-tasks 0 --llm-script examples/scripts/live-demo.json)
step "${run[@]}"
[ $? -eq 1 ] || status=1   # the config stop
step "${run[@]}" --model-display-name "Scripted Model" || status=1
# After a run: the corpus tools on the working corpus (5 executions, one failed)
step validate --corpus "$corpus" --strict || status=1
step recompute --corpus "$corpus" --dry-run || status=1
step verify --corpus "$corpus" || status=1
step stats --corpus "$corpus" --tables counts || status=1
step stats --corpus "$corpus" --tables results || status=1
# the corpus as a static site (no server; open its index.html in a browser)
step view --corpus "$corpus" || status=1
: > "$work/corpus-spec.toml"
# sealed as a release anyone can check offline (agentprov-corpus/0.3; a scripted corpus is
# sealed test_only), and the release verified
# signed with a key of the demo's own, made on its first run (its private half is never
# printed), and verified against the public half as a reader would
agentprov keys signing export-public demo > "$work/demo.pub" 2>/dev/null || {
  step keys signing new demo && agentprov keys signing export-public demo > "$work/demo.pub"
} || status=1
step package --corpus "$corpus" --corpus-version 0.1.0 --spec "$work/corpus-spec.toml" \
  --sign-key demo --out "$work/release" || status=1
step verify --corpus "$work/release" --trusted-key "$work/demo.pub" || status=1
echo
echo "the working corpus is $corpus.partial:"
ls "$corpus.partial"
echo "the environment stays in $AGENTPROV_HOME/envs/ for the next run"
exit $status
