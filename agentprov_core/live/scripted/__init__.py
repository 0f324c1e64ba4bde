"""The scripted transport (``--llm-script FILE``).

``script`` reads and validates the script file (format ``agentprov-llm-script/0.1``, see
docs/formats/llm-script.md); ``server`` serves it as an OpenAI-style Chat Completions
endpoint on loopback, so that a scripted run goes through the benchmark's own SDK client and
the recording transport exactly as a run against a real endpoint does.

Nothing is imported here: the CLI validates a script at start-up and should not pay for the
HTTP server's imports (import ``agentprov_core.live.scripted.script`` or ``.server`` directly).
"""
