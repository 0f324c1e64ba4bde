"""AgentDyn's worker package: the ``agentdyn`` source, served in its backend environment.

AgentDyn (SaFo-Lab/AgentDyn) is a fork of AgentDojo that installs as ``agentdojo`` 0.1.35,
with the same registries, so its catalogue is read and its cells are run exactly as
AgentDojo's are (``agentprov_dojo``). The profile states what the installed code cannot
tell: that the backend refuses every defence (the registry's rows are AgentDojo's), and the
declared instrumentation of AgentDyn's own code, whose behaviour differs from stock
AgentDojo 0.1.35 on the wire (each item names the code it describes).
"""

from agentprov_dojo.catalogue import SourceProfile
from agentprov_dojo.source import DojoSource

#: AgentDyn's own behaviour, declared in every cell's capture header
DECLARED = (
    # agent_pipeline/llms/openai_llm.py: `temperature` is sent whenever it is not None, so
    # the stock 0.0 reaches the wire (AgentDojo 0.1.35 sends `temperature or NOT_GIVEN`,
    # which drops 0.0); not sent for model ids starting o1, o3, o4 or gpt-5
    "agentdyn.temperature_transmitted@1 value: 0.0 (not sent for model ids starting o1, o3, "
    "o4, gpt-5)",
    # agent_pipeline/llms/openai_llm.py, _openai_to_assistant_message: a tool call whose
    # arguments do not parse is dropped from the assistant message, silently
    "malformed_tool_calls_dropped@1 element: OpenAILLM (a tool call whose arguments do not "
    "parse is left out of the conversation; the wire response keeps it)",
    # agent_pipeline/llms/openai_llm.py: the system prompt is sent as a developer message,
    # except for qwen3-max, which gets a system message
    "agentdyn.system_role@1 value: developer (system for the model id qwen3-max)",
    # data/system_messages.yaml: AgentDojo's default system message plus one line
    "agentdyn.system_prompt@1 value: AgentDojo's default plus \"Complete all tasks "
    "automatically without requesting user confirmation.\"",
    # default_suites/v1/tools/*: the tools read the clock and the random generator
    "agentdyn.art.nondeterministic_tools@1 reproducible: no (the tools read the clock and the "
    "random generator: a re-run is a new execution; the captured values are the evidence)",
)

SOURCE = DojoSource(SourceProfile(name="agentdyn", backend="agentdyn", declared=DECLARED))
