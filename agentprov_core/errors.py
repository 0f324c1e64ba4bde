"""The one registry of error codes: code, exit code, message, and the fix.

Every refusal and failure that agentprov reports is an :class:`AgentprovError` raised with a
code from :data:`REGISTRY`. The CLI renders it (:func:`render`), the reference page
``docs/reference/errors.md`` is generated from it (``python -m agentprov_core.errors``), and
tests assert the code and the exit code rather than the prose: run any command with
``--error-format json`` (or ``AGENTPROV_ERROR_FORMAT=json``) and the error is printed as
one JSON object on stderr.

Three renderings exist, because the specification's messages have three shapes:

``coded``       ``agentprov: error [CODE]: MESSAGE``
``usage``       ``agentprov COMMAND: MESSAGE`` (the usage refusals, exit 2)
``cannot_run``  ``agentprov: cannot run 'SOURCE': HEADLINE`` then indented detail lines; an
                exit-5 refusal before any worker starts ends with the line
                ``Nothing was started and nothing was written.`` (decision 16).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from agentprov_core.exitcodes import Exit

Style = Literal["coded", "usage", "cannot_run"]

NOTHING_WRITTEN = "Nothing was started and nothing was written."


@dataclass(frozen=True, slots=True)
class ErrorCode:
    code: str
    exit: Exit
    style: Style
    message: str
    fix: str = ""
    detail: tuple[str, ...] = ()


REGISTRY: dict[str, ErrorCode] = {}


def _reg(code: str, exit: Exit, style: Style, message: str, fix: str = "", *detail: str) -> None:
    assert code not in REGISTRY, code
    REGISTRY[code] = ErrorCode(code, exit, style, message, fix, tuple(detail))


U, E, R, X = Exit.USAGE, Exit.ENVIRONMENT, Exit.REFUSED, Exit.UNSUPPORTED

# --- usage (exit 2): incompatible options, missing cell or model options, caps combinations
_reg("cli.usage.preflight_caps", U, "usage",
     "--preflight-only is one model call; the caps belong to a campaign",
     "drop the caps options, or drop --preflight-only")
_reg("cli.usage.script_credential", U, "usage",
     "{flag} reads the key of a real endpoint; a scripted run needs none",
     "drop the credential option: --llm-script replies from the script")
_reg("cli.usage.llm_script", U, "usage",
     "--llm-script {location}: {what}",
     "correct the script (format agentprov-llm-script/0.1, docs/formats/llm-script.md)")
_reg("cli.usage.cost_needs_prices", U, "usage",
     "--max-cost-usd needs --price-in and --price-out (USD per million tokens)",
     "add both prices")
_reg("cli.usage.prices_need_cost", U, "usage",
     "--price-in and --price-out price the --max-cost-usd cap; give --max-cost-usd too",
     "add --max-cost-usd, or drop the prices")
_reg("cli.usage.autodojo_pair", U, "usage",
     "--attack autodojo needs --autodojo-cache and --autodojo-variant",
     "give both, with a cache file from the pinned fork")
_reg("cli.usage.autodojo_mixed", U, "usage",
     "--attack autodojo replays one cache for the whole plan and cannot be mixed with other attacks ({others})",
     "run the autodojo attack in a plan of its own")
_reg("cli.usage.autodojo_options_without_attack", U, "usage",
     "{flag} belongs to --attack autodojo",
     "add --attack autodojo, or drop the option")
_reg("cli.usage.autodojo_cache", U, "usage",
     "--autodojo-cache {path}: {field}: {what}; {fix}",
     "give a cache file of the pinned fork, unchanged (strict JSON: injection_tasks -> vector -> variants)")
_reg("cli.usage.backend_plan", U, "usage",
     "the backend refused the plan: {detail}",
     "complete the plan as the message says")
_reg("cli.usage.model_missing", U, "usage",
     "name the model: --model SHORTHAND, --endpoint NAME --model-id ID, or --llm-script FILE",
     "add one of them")
_reg("cli.usage.exclusive", U, "usage",
     "{first} and {second} cannot be used together",
     "keep one of them")
_reg("cli.usage.model_id_missing", U, "usage",
     "endpoint {endpoint} needs --model-id ID (there are no default model ids)",
     "add --model-id")
_reg("cli.usage.unknown_endpoint", U, "usage",
     "{option} {name}: no such endpoint in {registry}; endpoints: {known}",
     "use a registered endpoint name")
_reg("cli.usage.local_only_option", U, "usage",
     "{option} applies to local endpoints only; {endpoint} is not local",
     "drop the option")
_reg("cli.usage.base_url_required", U, "usage",
     "endpoint {endpoint} has no standard port, so no default base URL: give --base-url http://127.0.0.1:PORT/v1 (the server's OpenAI-style base), or set endpoints.{endpoint}.base_url in {settings}",
     "add --base-url URL")
_reg("cli.usage.plan_with_cell_options", U, "usage",
     "--plan replaces the cell options; drop {options}",
     "put the cells in the plan file, or drop --plan")
_reg("cli.usage.plan_file", U, "usage",
     "{location}: {what}",
     "correct the plan file (format agentprov-run-plan/0.1)")
_reg("cli.usage.plan_backend", U, "usage",
     "{location}: the plan is for backend {plan_backend!r}, but the command runs {source!r}",
     "run the source the plan names, or correct [plan].backend")
_reg("cli.usage.task_spec", U, "usage",
     "{option} {spec}: {what}",
     "use all, task ids, or index ranges such as 0-2,5")
_reg("cli.usage.unknown_suite", U, "usage",
     "--suite {name}: {backend} {version} has no such suite; suites: {known}",
     "choose from the listed suites")
_reg("cli.usage.unknown_attack", U, "usage",
     "--attack {name}: {backend} has no such attack; attacks: {known}",
     "choose from the listed attacks (agentprov run {backend} --catalogue)")
_reg("cli.usage.unknown_version", U, "usage",
     "--benchmark-version {name}: {backend} has no such version; versions: {known}",
     "choose from the listed versions")
_reg("cli.usage.unknown_source", U, "usage",
     "unknown source {name!r}; installed sources: {known}",
     "install the source's plugin distribution, or use an installed source")
_reg("cli.usage.source_not_installed", U, "usage",
     "source {name!r} is a part of this build, but its plugin {distribution} is not installed (pip install {distribution}); installed sources: {known}",
     "install the plugin distribution")
_reg("cli.usage.source_disabled", U, "usage",
     "source {name!r} comes from {distribution} {version}, which is {status} ({why})",
     "change AGENTPROV_LOAD_PLUGINS / AGENTPROV_DISABLED_PLUGINS")
_reg("cli.usage.no_cells", U, "usage",
     "the plan has no cells ({why})",
     "add an attack, or include the benign cells")
_reg("cli.usage.option_value", U, "usage",
     "{option} {value}: {what}",
     "give a value in the stated range")
_reg("cli.usage.option_for_other_kind", U, "usage",
     "{option} does not apply to {source}: {why}",
     "drop the option")
_reg("cli.usage.needs_corpus", U, "usage",
     "a run needs --corpus DIR and --campaign NAME (the corpus id is <source>-live-<campaign>)",
     "add both")
_reg("cli.usage.corpus_in_repository", U, "usage",
     "--corpus {path} is inside the repository {repo}; keep corpora outside it (under $AGENTPROV_HOME)",
     "name a directory outside the repository")
_reg("cli.usage.plan_json_without_dry_run", U, "usage",
     "--plan-json prints the plan of a dry run; add --dry-run",
     "add --dry-run")
_reg("cli.usage.jobs_above_host", U, "usage",
     "--jobs {jobs} is above this host's maximum of {maximum}; it is refused, never clamped",
     "give --jobs {maximum} or fewer")
_reg("cli.usage.registry_file", U, "usage",
     "{location}: {what}",
     "correct the registry file")
_reg("cli.usage.registry_field", U, "usage",
     "{location}: {field} {what}: {fix}",
     "correct the field as the message says (the file's header lists its keys)")
_reg("cli.usage.registry_unknown_entry", U, "usage",
     "{kind} {name!r} is not in {registry}; entries: {known}",
     "use a registered name")
_reg("cli.usage.unknown_preset", U, "usage",
     "--preset {name}: no such preset; the presets are {known}",
     "use one of them (registry/presets/, or $AGENTPROV_HOME/registry/presets/)")
_reg("cli.usage.preset_native_element", U, "usage",
     "--llm-element native with the preset {preset}: the stock element ignores the preset's request timeout (agent.params.timeout_s)",
     "drop --llm-element (a preset run uses gateway_compat), or drop the preset")
_reg("cli.usage.tune_jobs", U, "usage",
     "--tune-jobs {value}: {what}",
     "give distinct whole numbers from 1 to this host's maximum --jobs, e.g. --tune-jobs 1,2,4")
_reg("cli.usage.plugin_name", U, "usage",
     "plugin new {name!r}: {why}",
     "name the source with a lower-case letter then lower-case letters and digits, e.g. mybench")
_reg("cli.usage.plugin_out_exists", U, "usage",
     "plugin new {name}: {out} exists; a new plugin is written to a directory that does not",
     "give --out a new directory, or move the existing one away")

# --- environment (exit 3)
_reg("cli.environment.backend_missing", E, "coded",
     "environment {env_id} of backend {backend} is not built: run {build}",
     "run agentprov backends build BACKEND (with --source-repo URL for a backend whose pinned upstream is not public)")
_reg("cli.environment.no_backend_project", E, "coded",
     "backend {backend} has no environment project in this build ({why})",
     "use a source whose backend is in this build")
_reg("cli.environment.plugin_failed", E, "coded",
     "source {source!r} comes from {distribution} {version}, which failed to load: {error}",
     "reinstall or fix that distribution, or disable it with AGENTPROV_DISABLED_PLUGINS")
_reg("cli.environment.no_catalogue", E, "coded",
     "source {source!r} has no catalogue on this machine: {why}",
     "build the source's backend environment")
_reg("cli.environment.python", E, "coded",
     "no Python 3.12 interpreter found to build backend environments ({detail}); install python3.12 (e.g. apt-get install python3.12, or pyenv install 3.12) or set AGENTPROV_PYTHON; agentprov never downloads one",
     "install Python 3.12 or set AGENTPROV_PYTHON")
_reg("cli.environment.uv", E, "coded",
     "uv failed to build {env_id}: {detail}",
     "read uv's message; add --allow-network when the uv cache lacks a package")
_reg("cli.environment.lock_mismatch", E, "coded",
     "{lock} does not match {project}/pyproject.toml ({what}): re-lock the backend project "
     "{backend} (from {origin})",
     "re-lock: uv lock --project PROJECT (for a plugin's backend, a release of its "
     "distribution with the re-locked project)")
_reg("cli.environment.upstream_lock", E, "coded",
     "{lock} does not record what the pyproject.toml of {name} at commit {commit} declares "
     "(uv sync --locked refused it: {what}); nothing was built. Re-lock the backend project "
     "{backend} with that commit extracted into {project}/{upstream_dir}/ ({readme})",
     "re-lock the backend project against the commit: its README.md gives the commands")
_reg("cli.environment.backend_project_missing", E, "coded",
     "backend {backend} comes from {origin}, but its project is not there: {why}",
     "reinstall {distribution}, or fix the directory its agentprov_backends hook names")
_reg("cli.environment.backend_conflict", E, "coded",
     "backend {backend} is contributed by more than one distribution ({distributions}); "
     "agentprov does not choose between them",
     "uninstall one of them, or disable one with AGENTPROV_DISABLED_PLUGINS")
_reg("cli.environment.mapper_missing", E, "coded",
     "source {source!r} (from {plugin}) names the mapper {mapper!r} for its live evidence "
     "({format}), which cannot map it: {why}",
     "install or enable the distribution that registers that mapper (agentprov plugins "
     "lists the mappers), or correct the source's SourceMeta.mapper")
_reg("cli.environment.env_busy", E, "coded",
     "environment {env_id} is in use (locked by another build, check or run: {lock}); wait for it to finish",
     "wait for the other agentprov process")
_reg("cli.environment.build_io", E, "coded",
     "building {env_id} failed: {detail}; nothing was left at {path}",
     "free disk space or fix the permission, then build again")
_reg("cli.environment.marker", E, "coded",
     "the marker {marker} {what}: rebuild with agentprov backends build {backend}",
     "rebuild the environment")
_reg("cli.environment.offline_check", E, "coded",
     "{env_id} failed the offline check: {what}",
     "rebuild the environment: an environment is never edited by hand")
_reg("cli.environment.no_dataset", E, "coded",
     "backend {backend} needs its dataset ({origin} at revision {revision}), which is never downloaded: build it with --dataset DIR, a local copy",
     "agentprov backends build {backend} --dataset DIR (docs/backends.md, \"The AgentHarm backend\")")
_reg("cli.environment.dataset", E, "coded",
     "the dataset copy {path}: {what}; nothing was written",
     "give --dataset a complete, unaltered copy of the pinned revision (or the project's fixture)")
_reg("cli.environment.worker", E, "coded",
     "the worker of {env_id} failed: {detail}",
     "run agentprov backends build BACKEND --offline-check, then rebuild")
_reg("cli.environment.worker_missing", E, "coded",
     "the environment {env_id} built from the backend project {backend} ({origin}) cannot serve the source {source}: {why}; nothing was kept",
     "install the source's worker package in the backend project (a path dependency that registers it under the entry-point group agentprov.worker), lock it, and build again")
_reg("cli.environment.identity", E, "coded",
     "the worker of {env_id} reports an identity that differs from its marker ({what}): run agentprov backends build {backend} --offline-check",
     "rebuild the environment")
_reg("cli.environment.stale_worker", E, "coded",
     "the environment {env_id} holds other worker code than this agentprov builds from ({what}): it was built by another version of agentprov, or those sources changed since",
     "rebuild it: agentprov backends build {backend} (it replaces the stale environment)")
_reg("cli.environment.no_network_block", E, "coded",
     "cannot start the worker with the network blocked here ({detail}); install bubblewrap (apt-get install bubblewrap)",
     "install bubblewrap")
# an executor that runs cells on other hosts (agentprov-ray, docs/cluster.md)
_reg("cli.environment.cluster", E, "coded",
     "the cluster at {address} cannot run this campaign: {what}; nothing was written",
     "start the cluster (ray start --head) and give its address (--ray-address or RAY_ADDRESS): docs/cluster.md")
_reg("cli.environment.node_refused", E, "coded",
     "{count} node(s) of the cluster refused before any cell ran: {nodes}; nothing was written",
     "make each node match (agentprov and its plugins, agentprov backends build of the same environment, the key's variable: docs/cluster.md), or give --skip-refused-nodes to run on the others")
_reg("cli.environment.node_lost", E, "coded",
     "the node {node} was lost with the cell in flight ({detail})",
     "nothing to fix in the plan: T0 attempts the unit again on another node within --max-attempts (docs/cluster.md, \"When a node dies\"); bring the node back, or run on the others")
# defence assets (`backends build --defence-assets`, and T0 before a defended run)
_reg("cli.environment.defence_asset", E, "coded",
     "defence {defence}: {what} (agentprov backends build {backend} --defence-assets {asset})",
     "provision it: agentprov backends build BACKEND --defence-assets ID (docs/provisioning-defences.md)")
_reg("cli.environment.defence_asset_unpinned", E, "coded",
     "defence asset {asset} pins no files in the defence registry ({registry}, [assets.{asset}]): {why}; nothing of it can be provisioned",
     "a maintainer adds its files (path, sha256, git blob id, size) to the registry")
_reg("cli.environment.defence_asset_group", E, "coded",
     "defence asset {asset} needs the dependency group {group} ({distributions}), which {project}/uv.lock does not declare: add [dependency-groups] {group} to {project}/pyproject.toml and re-lock (uv lock --project {project}; a new environment id)",
     "declare the group and re-lock the backend project")
_reg("cli.environment.defence_asset_missing", E, "coded",
     "defence asset {asset}: its pinned file {path}{more} is neither in {source} nor in the fetch cache {cache}: {how}",
     "fetch it with --allow-network, or give --defence-source DIR")
_reg("cli.environment.defence_asset_mismatch", E, "coded",
     "defence asset {asset}: {file} does not match its pin {path}: sha256 {sha256} (pinned {pinned_sha256}), git blob {git_blob} (pinned {pinned_git_blob}), {size} bytes (pinned {pinned_size}); nothing was written",
     "use the asset's tree at its pinned commit or revision")
_reg("cli.environment.defence_asset_fetch", E, "coded",
     "fetching defence asset {asset} from {origin} failed: {what}",
     "check the network, or give --defence-source DIR")
_reg("cli.usage.worker_plan", U, "usage",
     "the backend refused the plan: {detail}",
     "plan only what the installed benchmark holds (agentprov run SOURCE --catalogue)")
_reg("cli.usage.defence_asset_unknown", U, "usage",
     "--defence-assets {asset}: not an asset of the defence registry ({registry}); assets: {known}",
     "name registry assets, comma-separated, or none")
_reg("cli.usage.defence_source", U, "usage",
     "--defence-source {value}: {what}",
     "give --defence-source DIR (the one code asset named) or ID=DIR, with --defence-assets")
_reg("cli.usage.defence_endpoint_missing", U, "usage",
     "defence {defence} calls a model of its own: give --defence-endpoint NAME (an endpoints.toml entry for its embeddings)",
     "add --defence-endpoint NAME")
_reg("cli.usage.defence_endpoint_unused", U, "usage",
     "--defence-endpoint {endpoint}: defence {defence} calls no model of its own",
     "drop --defence-endpoint")
_reg("cli.usage.unknown_backend", U, "usage",
     "unknown backend {name!r}; backends: {known}",
     "use a backend of this build")
_reg("cli.usage.env_file", U, "usage",
     "--env-file {path}: no such file",
     "name an existing .env file")

# --- refused by a guard (exit 4)
_reg("cli.refused.api_caps", R, "coded",
     "an API endpoint run needs its caps ({why}): give {missing} (D-725; the provider's own key limit is the backstop)",
     "give --max-calls, --max-cost-usd, --price-in, --price-out")

_reg("cli.refused.corpus_busy", R, "coded",
     "the corpus {corpus} is being written by another agentprov run (its lock is held); only one writer at a time",
     "wait for the other run, or name another --corpus")
_reg("cli.refused.mixed_config", R, "coded",
     "the corpus {corpus} holds configuration {have}, and this run is configuration {want}: a different model, endpoint, parameters or backend; pass --allow-mixed-config to add it anyway",
     "use another --corpus, or --allow-mixed-config")
_reg("cli.refused.mixed_plan", R, "coded",
     "the corpus {corpus} holds these cells run another way: {what}; its units would not be this plan's, so this plan would mix two campaigns in one corpus; pass --allow-mixed-config to add its units as new units anyway",
     "re-run with the corpus's own settings, use another --corpus, or --allow-mixed-config")
_reg("cli.refused.mixed_transport", R, "coded",
     "the corpus {corpus} holds {have} sessions and this run is {want}: a scripted and a real session never share a corpus",
     "use another --corpus")
_reg("cli.refused.restricted_corpus", R, "coded",
     "--corpus {corpus}: {where} resolves to {resolved}, outside $AGENTPROV_HOME ({home}); {why} (R-25.38), kept under $AGENTPROV_HOME: name a corpus there, e.g. --corpus {suggestion}",
     "name a corpus under $AGENTPROV_HOME, e.g. --corpus $AGENTPROV_HOME/corpora/NAME (symlinks are resolved)")
_reg("cli.environment.corpus", E, "coded",
     "the corpus {corpus} cannot be used: {what}",
     "repair or move the corpus, then re-run")

# --- unsupported (exit 5): printed before anything starts
_reg("run.unsupported.no_live_capability", X, "cannot_run",
     "no live capability", "none in this build",
     "{source} has no backend in this build{because}.")
_reg("run.unsupported.planned", X, "cannot_run",
     "live status planned", "a planned part admits scripted runs only: use --llm-script",
     "The {part} part is planned: it admits scripted runs (--llm-script) only.")
_reg("run.unsupported.defence_unknown", X, "cannot_run",
     "defence {defence}.", "use a registry defence",
     "It is not in the defence registry ({registry}). The {backend} backend builds: {built} (D-670, D-671).")
_reg("run.unsupported.defence_replaces_pipeline", X, "cannot_run",
     "defence {defence} replaces pipeline components.", "none in this build",
     "DRIFT, Progent and CaMeL need defence-specific capture (D.11.6).")
_reg("run.unsupported.defence_backend", X, "cannot_run",
     "defence {defence} for the {backend} backend.", "use a backend that builds it",
     "The registry builds it on: {builders}.")
_reg("run.unsupported.defence_suite", X, "cannot_run",
     "defence {defence} on {suite}.", "plan the suites it runs on",
     "It runs on {suites} only.")
_reg("run.unsupported.defence_wire", X, "cannot_run",
     "defence {defence} on the {endpoint} endpoint.", "use an OpenAI-style endpoint, or another defence",
     "It needs an OpenAI-style element: AgentDojo's OpenAILLMToolFilter calls the agent's own model through the OpenAI client, and the {endpoint} endpoint is {style}.")
_reg("run.unsupported.defence_disabled", X, "cannot_run",
     "defence {defence} is disabled.", "agentprov registry defences enable NAME",
     "The defence registry ({registry}) or its overlay ($AGENTPROV_HOME/registry/defences.toml) has it disabled; a maintainer enables it with agentprov registry defences enable {defence}.")
_reg("run.unsupported.attack_refused", X, "cannot_run",
     "attack {attack}.", "choose another attack",
     "The {backend} backend refuses it: {reason}")
_reg("run.unsupported.endpoint_wire", X, "cannot_run",
     "an endpoint of the {wire} format.", "use an endpoint of the OpenAI chat format (e.g. openrouter)",
     "The {backend} backend calls the agent and its judges through Inspect's OpenAI-style provider, so its endpoint must speak the {wires} format (R-25.25).")
_reg("run.unsupported.cell_bound", X, "cannot_run",
     "caps for {source}.", "run without --max-calls and --max-cost-usd (a local server), or declare the source's cell bound",
     "Its plugin declares no D-740 cell bound (InspectSource.cell_bound: a, j and K), so no cell has a known worst case and no cap can be kept.")
_reg("run.unsupported.llm_element", X, "cannot_run",
     "--llm-element {element}.", "use the native element",
     "{reason}")


# --- the corpus tools: validate, recompute, verify, stats, package
_reg("corpus.usage.not_found", U, "usage",
     "--corpus {corpus}: no such directory (nor {corpus}.partial)",
     "give the corpus directory a run wrote (a working corpus ends in .partial)")
_reg("corpus.environment.not_a_corpus", E, "coded",
     "{corpus} is not an agentprov corpus: {what}",
     "give the directory a run wrote: it holds manifest.json and ledger.jsonl")
_reg("package.usage.spec", U, "usage",
     "package needs --spec FILE (the corpus spec: what is released, under which licence)",
     "give --spec PATH/corpus-spec.toml")
_reg("build.unsupported.no_backend", X, "coded",
     "backend {backend} cannot be built in this build: {why}",
     "none in this build: the backend builds once its uv project (pyproject.toml and uv.lock) is under backends/")
_reg("build.unsupported.defence_assets", X, "coded",
     "backend {backend} builds no defences: --defence-assets and --defence-source provision them for {builders} only",
     "drop the defence options, or build agentdojo")
_reg("build.unsupported.dataset", X, "coded",
     "backend {backend} takes no dataset: --dataset provisions one for {takers} only",
     "drop --dataset")
_reg("build.unsupported.source_repo", X, "coded",
     "backend {backend} is built from its uv.lock alone: --source-repo provides the pinned upstream commit of {builders} only",
     "drop --source-repo")
_reg("run.unsupported.preset_uncalibrated", X, "cannot_run",
     "the preset {preset} is not calibrated.", "calibrate it with --tune-jobs, or use a calibrated preset",
     "Only a preset marked calibrated = true runs live (D-823); an uncalibrated one plans --dry-run and --tune-jobs only.")
_reg("run.unsupported.preset_host", X, "cannot_run",
     "the preset {preset} on this host.", "use a preset calibrated for this host, or run without one",
     "{why}.")
_reg("run.unsupported.preset_memory", X, "cannot_run",
     "the preset {preset} for this model.", "use a smaller model or a larger host",
     "{why}.")
_reg("run.unsupported.defence_endpoint", X, "cannot_run",
     "defence {defence} with --defence-endpoint {endpoint}.", "none in this build",
     "A defence's own model endpoint is not wired in this build: its key would be a second key in the worker and its host:port a second pair of the egress proxy, and neither is built or tested (docs/provisioning-defences.md).")
_reg("package.refused.restricted", R, "coded",
     "{corpus} is not packaged: {why} (its evidence holds {holds}; licence: {licence}), which is never deposited; releasing it needs a separate decision of the project owner (R-25.38). Keep it under $AGENTPROV_HOME: validate, verify, stats and recompute read it there",
     "keep the corpus under $AGENTPROV_HOME; validate, verify, stats and recompute read it where it is")
_reg("recompute.unsupported.remap_live", X, "coded",
     "re-mapping a live corpus from its raw evidence is not supported (D-43): recompute re-derives SEM, PROV and validation from the stored AER",
     "drop --remap")
_reg("package.unsupported.sealing", X, "coded",
     "{corpus} is {format}: package seals the live corpus of a run (agentprov-live-corpus/0.1) only, and an import or a sealed corpus is not sealed again",
     "seal the working corpus a run wrote; keep an import corpus as it is")
_reg("package.usage.version", U, "usage",
     "package needs --corpus-version V (the version of the sealed corpus, e.g. 0.1.0)",
     "add --corpus-version V")
_reg("package.usage.option", U, "usage",
     "{option} {value}: {what}",
     "correct the option (docs/corpus-tools.md, \"package\")")
_reg("package.refused.unfinished", R, "coded",
     "{corpus} is not sealed: {what}. Nothing was written",
     "let the campaign finish (or resume it until it does), then package again")
_reg("package.refused.unsealable", R, "coded",
     "{corpus} is not sealed: {what}. Nothing was written",
     "{fix}")
_reg("package.refused.rewritten", R, "coded",
     "{corpus} is not sealed as a later release of {previous}: {what}; a release only adds to the one before it. Nothing was written",
     "seal the corpus the earlier release was sealed from, after its resume; or drop --previous to start a new series")
_reg("recompute.unsupported.remap", X, "coded",
     "re-mapping a corpus from its raw evidence is not in this build: recompute re-derives SEM, PROV and validation from the stored AER",
     "drop --remap")
_reg("recompute.usage.out_needed", U, "usage",
     "without --dry-run, recompute writes what it derives to a new tree: give --out DIR (the corpus itself is never rewritten: its evidence is append-only)",
     "add --out DIR, or --dry-run to compare only")
_reg("recompute.usage.out", U, "usage",
     "--out {out}: {what}",
     "give a new directory outside the corpus")
_reg("validate.environment.release", E, "coded",
     "validate --release needs the SHACL tier's libraries ({missing}); they are the 'release' extra",
     "install agentprov[release] (rdflib and pyshacl), or use --strict")

# --- stats: the results table and the comparison (agentprov_core/audit/results.py, compare.py)
_reg("stats.usage.by_key", U, "usage",
     "--by {key}: not a key of the results table; the keys are {keys}",
     "give comma-separated keys from that list, e.g. --by model,suite,attack,defence")
_reg("stats.usage.format", U, "usage",
     "--format {format}: not a format of {what}; the formats are {formats}",
     "give one of those formats")
_reg("stats.usage.corpus_needed", U, "usage",
     "stats needs a corpus: give DIR, --corpus DIR, or --compare DIR_A DIR_B …",
     "name the corpus a run wrote")
_reg("stats.usage.compare_corpora", U, "usage",
     "--compare needs at least two corpora ({given} given)",
     "give --compare DIR_A DIR_B [DIR_C …]: the first is the baseline")
_reg("stats.usage.compare_tables", U, "usage",
     "--compare compares the results tables; --tables {tables} is not compared",
     "drop --tables, or run stats on each corpus for its {tables}")
_reg("view.usage.corpus_needed", U, "usage",
     "view needs a corpus: give DIR or --corpus DIR (--corpus again for each further corpus)",
     "name the corpus a run or an import wrote")
_reg("view.usage.out_in_corpus", U, "usage",
     "--out {out} is inside the corpus {corpus}: a corpus is evidence and is never written to",
     "give a directory outside the corpus, or leave --out out ($AGENTPROV_HOME/views/<corpus id>)")
_reg("view.usage.out_not_a_view", U, "usage",
     "--out {out} exists and is not a site agentprov view wrote (it has no {marker})",
     "give a new or empty directory, or the directory of an earlier view, which is replaced")
_reg("view.refused.restricted", R, "coded",
     "{corpus} is a restricted-use corpus ({why}): it is viewed only under $AGENTPROV_HOME "
     "({home}), and {what} {where} is outside it",
     "keep the corpus and the site under $AGENTPROV_HOME (leave --out out: the site goes to "
     "$AGENTPROV_HOME/views/<corpus id>)")
_reg("stats.usage.different_benchmarks", U, "usage",
     "--compare: {a} holds {a_holds} and {b} holds {b_holds}: different sources or benchmark versions, so a difference between them would measure the benchmark as well as what you changed; add --across-benchmarks if that comparison is meant",
     "compare corpora of one source and benchmark version; to compare these as they are, add --across-benchmarks (each difference then names both benchmarks)")
_reg("stats.usage.no_shared_cells", U, "usage",
     "--compare: {a} and {b} share no cell (the same suite, user task, injection task and attack; for an Inspect task the same sample), so no unit pairs and no difference can be given",
     "compare corpora over the same cells, with what you want to compare changed (the defence, the model, live against imported)")


# --- agentprov import (agentprov_core/evidence/importing.py, docs/importing.md); a file it
# keeps out is reported with one of IMPORT_FINDINGS (below)
_reg("import.usage.unknown_kind", U, "usage",
     "'{kind}' is not a kind of result files this build imports (importers: {known})",
     "give one of the importers: agentprov import agentdojo LOGDIR --corpus DIR")
_reg("import.usage.unknown_source", U, "usage",
     "--source {source}: no installed source of that name (installed: {known})",
     "give the source whose benchmark wrote the files (agentdojo, agentdyn, autodojo)")
_reg("import.usage.logdir", U, "usage",
     "{logdir}: {what}",
     "give the directory the benchmark's runner wrote its results to (its --logdir)")
_reg("import.usage.too_many", U, "usage",
     "{logdir} holds more than {limit:,} entries; an import lists at most that many",
     "import its configurations' directories one at a time")
_reg("import.refused.corpus", R, "coded",
     "the corpus {corpus} does not take this import: {why}",
     "give a new --corpus DIR, or the import corpus of the same source and kind")


# --- keys: the keychain, --env-file and --env-stdin (agentprov_core/live/keys.py). No message
# ever holds a key's value: errors name the variable, the file and the line only.
_reg("cli.environment.credential", E, "coded",
     "no key {variable}: {searched}; store it with agentprov keys set {variable}, or give --env-file PATH (or --env-stdin)",
     "agentprov keys set NAME, or --env-file")
_reg("cli.environment.keychain_unavailable", E, "coded",
     "the OS keychain cannot be used: {why}; agentprov never falls back to a plaintext store: give the key with --env-file PATH or --env-stdin instead",
     "use a real keychain backend, or --env-file / --env-stdin")
_reg("cli.usage.env_file_syntax", U, "usage",
     "{location}: {what}",
     "correct the .env file: NAME=VALUE lines, # comments, optional export and quotes")
_reg("cli.usage.env_stdin", U, "usage",
     "--env-stdin: {what}",
     'pipe one JSON object of string variables, e.g. {"OPENROUTER_API_KEY": "..."}')
_reg("cli.usage.key_name", U, "usage",
     "{name!r} is not a key variable of {registry}; key variables: {known}",
     "use a key variable an endpoint names (agentprov keys status lists them)")
_reg("cli.usage.key_value", U, "usage",
     "the value given for {variable} {what}",
     "give the key as one line, without spaces")
_reg("cli.usage.key_prompt", U, "usage",
     "keys set prompts for the key on a terminal, and stdin is not one: pipe one line with --stdin",
     "add --stdin, or run it on a terminal")

# --- signing keys for sealed corpora (agentprov_core/live/signingkeys.py). No message ever
# holds a private key's bytes.
_reg("keys.usage.signing_name", U, "usage",
     "{name!r} is not a signing key name: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit",
     "give a name such as lab-2026")
_reg("keys.refused.signing_exists", R, "coded",
     "the signing key {name} exists ({path}): a signing key is never replaced",
     "choose another name; keep the old key while a release signed with it is read")
_reg("keys.environment.signing_missing", E, "coded",
     "the signing key {name} cannot be used: {what}",
     "agentprov keys signing list shows the keys; make one with agentprov keys signing new NAME")
_reg("verify.usage.trusted_key", U, "usage",
     "--trusted-key {path}: {what}",
     "give the PEM public key the corpus's author published (agentprov keys signing export-public NAME)")
_reg("verify.usage.proof", U, "usage",
     "--proof {path}: {what}",
     "give a proof bundle written by agentprov package --proof (format agentprov-proof/0.1)")
_reg("verify.environment.worker_lost", E, "coded",
     "a process checking the corpus {corpus} ended before it answered ({what}): nothing is "
     "verified",
     "run verify again; if it recurs, look for the memory limit or the signal that ended it "
     "(AGENTPROV_VERIFY_PROCESSES=0 checks in one process)")

# --- the egress proxy (agentprov_core/live/egress.py, D-664)
_reg("cli.refused.egress_target", R, "coded",
     "the endpoint {url} cannot be reached through the egress proxy: {why}",
     "use an https endpoint, or plain http to one literal LAN address (docs/egress.md)")
_reg("run.environment.egress", E, "coded",
     "the egress proxy could not start: {what}",
     "free the loopback port or the socket path, then re-run")
_reg("cli.refused.cluster_egress", R, "coded",
     "--executor {executor}: the endpoint is reached through T0's egress proxy ({targets}), which listens on this host only (its loopback port and Unix socket), and a cell reaches an API host through nothing else; on a cluster a cell reaches {supported}; nothing was written",
     "run an API endpoint with the local executor, or serve the model on each node at the same loopback address (docs/cluster.md)")
# --- the adaptive start gate (agentprov_core/run/gate.py)
_reg("run.environment.rate_limited", E, "coded",
     "{why}: the run stopped with {left} unit(s) not started; every attempt made is in the ledger",
     "wait for the provider's limit to reset (or raise it, or lower --jobs) and re-run the same command: it resumes")

# --- real endpoints: model options (2), the endpoint URL, the containment, consent (4)
# (agentprov_core/run/prepare.py steps 1 and 3, agentprov_core/run/consent.py step 7)
_reg("cli.usage.max_tokens_required", U, "usage",
     "--max-tokens N|harness-default is required on the Anthropic endpoint {endpoint}: AgentDojo's own 1,024 is never used silently",
     "add --max-tokens N, or --max-tokens harness-default to accept AgentDojo's 1,024 (recorded)")
_reg("cli.usage.max_tokens_openai", U, "usage",
     "--max-tokens is refused on the OpenAI-style endpoint {endpoint}: the stock element does not transmit it",
     "drop --max-tokens")
_reg("cli.usage.reasoning_effort_anthropic", U, "usage",
     "--reasoning-effort is not accepted on the Anthropic endpoint {endpoint}",
     "drop --reasoning-effort")
_reg("cli.usage.parameter_not_transmitted", U, "usage",
     "{option} {value} is configured, and the stock {element} element does not transmit it to {endpoint} ({why}; A3): pass --temperature-policy as-benchmark to accept the benchmark's behaviour (recorded), or drop {option}",
     "add --temperature-policy as-benchmark, or drop the parameter")
_reg("run.unsupported.temperature_policy", X, "cannot_run",
     "--temperature-policy {policy}.", "use --temperature-policy as-benchmark, or drop the parameter",
     "Injecting a parameter the stock element does not transmit is not available in this build.")
_reg("cli.refused.endpoint", R, "coded",
     "the endpoint URL {url} is refused: {why}",
     "use the endpoint's registered https URL, a loopback server, or --allow-custom-endpoint / --allow-lan-endpoint as the message says")
_reg("cli.refused.lan_key", R, "coded",
     "{variable} is set, and the base URL {url} is a LAN address: a key is never sent to a LAN address",
     "remove {variable} from the keychain and .env for this run, or use the server on loopback")
_reg("cli.refused.containment", R, "coded",
     "a real-model run needs a declared containment: {why}",
     "declare --containment dedicated-user or vm truthfully; or use bwrap (Linux) or sandbox-exec (macOS) once agentprov backends build has recorded a passed probe of the current profile")
_reg("cli.refused.preflight", R, "coded",
     "the preflight probe refused {endpoint} ({url}): {why}",
     "fix what the reason names (the endpoint, the model, the parameter), or accept it with the option it names; docs/running.md")
_reg("cli.environment.preflight", E, "coded",
     "the preflight probe could not use {endpoint} ({url}): {why}",
     "check the network, the key and the model id, then re-run")
_reg("cli.refused.consent", R, "coded",
     "a real-model run needs consent {why}",
     "--i-consent-to-local-run (local) or --i-consent-to-api-costs, or answer y at the prompt on a terminal")

# --- local models (agentprov_core/live/local/, agentprov models; step 4 of run, R-16.4). The
# refusals of a local server come before consent and never contact anything but loopback.
_reg("run.local.unreachable", E, "coded",
     "the {kind} server at {url} cannot be reached: {why}",
     "start the server (or point --base-url at it), then re-run")
_reg("run.local.unauthorized", E, "coded",
     "the server at {url} wants a key (HTTP {status}): {how}",
     "store the endpoint's key variable (agentprov keys set NAME, or .env), or run the server without a key")
_reg("run.local.bad_listing", E, "coded",
     "{url} is not an OpenAI-style model listing: {why}",
     "point --base-url at the server's OpenAI-style base (…/v1)")
_reg("run.local.model_not_served", E, "coded",
     "{endpoint} ({url}) does not serve {model!r}; it serves: {served}",
     "use a served id (agentprov models --endpoint NAME lists them), or load the model")
_reg("run.local.no_model_id", E, "coded",
     "no model id for {endpoint}, and no terminal to pick one on: give {hint}; it serves: {served}",
     "give --model-id ID")
_reg("run.local.wrong_server", R, "coded",
     "the server at {url} is not {kind}: it answers as {found} (several defaults share ports 8000 and 8080){hint}",
     "use the endpoint of the server that runs there (openai_compat for an OpenAI-compatible server of another kind), or point --base-url at the right port")
_reg("run.local.remote_model", R, "coded",
     "{model!r} on {endpoint} is a remote model ({why}): its prompts would leave this machine, and a local endpoint only runs local models",
     "pull or load a local model, or use an API endpoint with its consent and caps")
_reg("cli.refused.local_tool_prompt", R, "coded",
     "LM Studio serves {model!r} without native tool use ({why}): the server adds its own tool-use system prompt, which the wire capture cannot see; pass --allow-text-tool-calls to accept it (recorded)",
     "use a model with native tool use, or --allow-text-tool-calls")
_reg("cli.usage.model_dir", U, "usage",
     "--model-dir {path}: no such directory",
     "name the folder that holds the model's files")
_reg("cli.usage.models_options", U, "usage",
     "{what}",
     "agentprov models --help")
_reg("cli.environment.source_not_cached", E, "coded",
     "the pinned commit {commit} of {name} is not in the fetch cache ({path}): give --source-repo URL (a mirror, a path or a bundle holding the commit){how}",
     "give --source-repo URL (a mirror, a path or a bundle holding the commit), or, for a public upstream, --allow-network")
_reg("cli.environment.source_fetch", E, "coded",
     "fetching commit {commit} of {name} from {url} failed: {why}",
     "check the URL or path (--source-repo) and that it holds the pinned commit")
_reg("cli.environment.source_commit", E, "coded",
     "the commit {commit} of {name} is not the pinned one: {why}",
     "fetch the pinned commit from a source that holds it (--source-repo URL); the fetch cache is $AGENTPROV_HOME/fetch/")
_reg("cli.environment.autodojo_cache_commit", E, "coded",
     "the attack cache cannot be verified against the pinned fork commit {commit} ({path}): {why}; put the commit in the fetch cache with agentprov backends build autodojo --source-repo URL (a mirror, a path or a bundle holding it)",
     "put the fork's commit in the fetch cache: agentprov backends build autodojo --source-repo URL (a mirror, a path or a bundle holding it; the fork is not public)")
_reg("cli.environment.autodojo_cache_blob", E, "coded",
     "the attack cache {path} (git blob {blob}) is not a file of the fork at {commit}: {why}; give a cache file copied unchanged from that commit",
     "give a cache file copied unchanged from the pinned fork commit")
_reg("cli.environment.models_cache", E, "coded",
     "no cached model list for {endpoint} ({path}): agentprov models --endpoint {endpoint} --allow-network fetches it (list calls only, no tokens, no cost)",
     "add --allow-network once")
_reg("cli.environment.models_fetch", E, "coded",
     "fetching {endpoint}'s model list from {url} failed: {why}",
     "check the key and the network, then re-run with --allow-network")

# --- settings and model facts (agentprov_core/settings.py, agentprov settings, D-828; the
# model-fact flags of run, agentprov_core/live/local/facts.py; models --find-folders)
_reg("cli.usage.setting_key", U, "usage",
     "{key}: {what}; the keys are {schema}",
     "give a key of the schema (docs/running.md, Settings)")
_reg("cli.usage.setting_value", U, "usage",
     "{key} = {value}: it must be {what}",
     "give a value of the key's type; nothing was written")
_reg("cli.usage.settings_file", U, "usage",
     "the settings file {location}: {what}",
     "correct the file ($AGENTPROV_HOME/settings.toml), or edit it with agentprov settings set|unset")

# --- estimates and prices (agentprov estimate, agentprov prices; agentprov_core/estimate/).
# Nothing is written before any of these.
_reg("cli.usage.stats_corpus", U, "usage",
     "--stats-corpus {path}: {what}",
     "name at most 16 corpus directories (each holding a manifest.json), or drop --stats-corpus")
_reg("cli.usage.prices_file", U, "usage",
     "{path}: {field}: {what}",
     "correct the file, or remove it: agentprov prices set writes the overrides anew, prices refresh --allow-network the list (docs/estimates.md)")
_reg("cli.usage.estimate_option", U, "usage",
     "{option} belongs to agentprov run: an estimate runs nothing and prints its own plan",
     "drop the option (agentprov run --dry-run prints the plan)")
_reg("cli.refused.prices_network", R, "coded",
     "prices refresh reads OpenRouter's public model list ({url}): a network call, never made without --allow-network",
     "add --allow-network")
_reg("cli.environment.prices_fetch", E, "coded",
     "reading the price list from {url} failed: {why}",
     "check the network, then re-run agentprov prices refresh --allow-network")

#: Register codes: what the evidence records about an execution or a session (in AERs,
#: ledger entries and the quarantine register). They are not errors of the command that
#: meets them and have no exit code of their own; a run counts them in its summary
#: (``issues   map.capture_error x1, …``).
REGISTER_CODES: dict[str, str] = {
    "capture.quarantined": "a staged file of the session held a secret: nothing of it was stored, its staging directory was kept",
    "map.capture_error": "the capture log records that the session did not complete: errored or aborted (a setup refusal, an exception, a dead worker, a timeout)",
    "map.capture_damaged": "the capture log failed its chain check, or is missing from the raw store",
    "map.no_execution_observed": "no model call and no tool call was recorded: the benchmark never ran the agent",
    "map.staging_refused": "T0 refused a file the worker staged (a symlink, a hard link, a FIFO, a device or another non-regular file, a file over its size cap) or a path it returned (absolute, with '..', a NUL byte, too long): the session is errored, the refused file was never read nor stored (docs/containment.md)",
    "map.native_missing": "the session completed but the benchmark's native log is missing or unreadable (session incomplete)",
    "map.live_native_disagree": "the capture's view and the native log's view of the session differ (the live-versus-native check)",
    "map.unverifiable_accounting": "the calls the capture counts could not be checked against the worker's own count",
    "map.sample_errored": "a sample errored in the harness (an Inspect cell): it is kept and imported, and its cell is incomplete (D-743)",
    "map.defence_mismatch": "the defence the capture records (installed, or in its header) is not the one the ledger planned for the session",
    "map.result_error": "an imported result file records an error: the benchmark skipped the task (AgentDojo then scores it utility false, security true); the execution is failed",
    "map.result_incomplete": "an imported result file records no utility or no security score: the cell did not finish; the execution is failed",
}

#: Import findings: why ``agentprov import`` kept a file out of the corpus. Each is reported
#: with the file's name and what is wrong (the field, never a value of it: a value may hold
#: a key); the other files are imported, and the import exits 1.
IMPORT_FINDINGS: dict[str, str] = {
    "import.file.malformed": "the file is not a well-formed result (not UTF-8, not JSON, nested too deeply, a field missing or of the wrong type, a string that is not valid Unicode such as a lone surrogate \\ud800): restore it from its source, or leave it out",
    "import.file.other_format": "the file is not a result of the importer's layout and format (another path, another JSON document, another kind of file): import only the runner's result files",
    "import.file.path_mismatch": "the file's name and its content name different cells (suite, user task, attack or injection task): restore the file or its name as the runner wrote them",
    "import.file.duplicate_cell": "the corpus already holds this cell of this configuration, from a file with other bytes, or holds its execution while its ledger line is torn: an import keeps one file per cell and writes an execution once (import the other one into a corpus of its own)",
    "import.file.unreadable": "the file or directory cannot be read, or is larger than 16 MiB",
    "import.file.not_regular": "a link, FIFO, socket or device: only regular files are read, and a link is never followed",
    "import.file.unsafe_name": "a part of its name is not a plain name (not printable, longer than 200 characters, or a key-shaped string): rename it as the runner names it",
}


class AgentprovError(Exception):
    """An error with a registered code. ``params`` fill the message templates."""

    def __init__(self, code: str, /, **params: object) -> None:
        if code not in REGISTRY:
            raise KeyError(f"unregistered error code {code!r}")
        self.spec = REGISTRY[code]
        self.params = params
        super().__init__(self.message)

    @property
    def code(self) -> str:
        return self.spec.code

    @property
    def exit_code(self) -> int:
        return int(self.spec.exit)

    @property
    def message(self) -> str:
        return self.spec.message.format(**self.params)

    @property
    def detail(self) -> list[str]:
        return [d.format(**self.params) for d in self.spec.detail]


def render(err: AgentprovError, command: str) -> str:
    """The human rendering of ``err`` for the command ``command`` (e.g. ``run``)."""
    s = err.spec
    if s.style == "usage":
        prefix = f"agentprov {command}" if command else "agentprov"
        return f"{prefix}: {err.message}"
    if s.style == "cannot_run":
        lines = [f"agentprov: cannot run '{err.params.get('source', '')}': {err.message}"]
        lines += [f"  {d}" for d in err.detail]
        if s.exit == Exit.UNSUPPORTED:
            lines.append(NOTHING_WRITTEN)
        return "\n".join(lines)
    return f"agentprov: error [{s.code}]: {err.message}"


def render_json(err: AgentprovError, command: str) -> str:
    return json.dumps(
        {"error": err.code, "exit": err.exit_code, "command": command,
         "message": render(err, command)},
        sort_keys=True,
    )


def reference_markdown() -> str:
    """The page docs/reference/errors.md, generated from :data:`REGISTRY`."""
    out = [
        "# Error codes and exit codes",
        "",
        "Generated from `agentprov_core/errors.py` by `python -m agentprov_core.errors`; a test",
        "fails when this page and the registry differ. Do not edit by hand.",
        "",
        "Exit codes: " + ", ".join(f"{int(e)} {e.name.lower()}" for e in Exit) + ".",
        "",
        "Any command run with `--error-format json` (or `AGENTPROV_ERROR_FORMAT=json`) prints",
        "an error as one JSON object on stderr: `error` (the code), `exit`, `command`, `message`.",
        "",
        "| code | exit | message | fix |",
        "|---|---|---|---|",
    ]
    for spec in sorted(REGISTRY.values(), key=lambda s: (int(s.exit), s.code)):
        msg = spec.message
        if spec.detail:
            msg += " / " + " ".join(spec.detail)
        msg = msg.replace("|", "\\|")
        out.append(f"| `{spec.code}` | {int(spec.exit)} | {msg} | {spec.fix} |")
    out += ["", "## Register codes", "",
            "What the evidence records about an execution or a session (AERs, ledger entries,",
            "the quarantine register). No exit code of their own: a run counts them in its",
            "summary (`issues   map.capture_error x1, …`).", "",
            "| code | meaning |", "|---|---|"]
    out += [f"| `{c}` | {m} |" for c, m in sorted(REGISTER_CODES.items())]
    out += ["", "## Import findings", "",
            "Why `agentprov import` kept a file out of the corpus: each is reported with the",
            "file's name and what is wrong; the other files are imported, and the import exits 1.",
            "", "| code | meaning |", "|---|---|"]
    out += [f"| `{c}` | {m} |" for c, m in sorted(IMPORT_FINDINGS.items())]
    return "\n".join(out) + "\n"


if __name__ == "__main__":  # pragma: no cover - exercised by the docs test
    import sys

    sys.stdout.write(reference_markdown())
