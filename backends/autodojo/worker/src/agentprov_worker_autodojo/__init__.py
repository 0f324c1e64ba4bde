"""AutoDojo's worker package: the ``autodojo`` source, served in its backend environment.

AutoDojo's fork (at ``aa458794``) is a fork of AgentDojo that installs as ``agentdojo``
0.1.35 with the same registries, so its catalogue is read from the installed code and its
cells run exactly as AgentDojo's are (``agentprov_dojo``). The profile states what the
installed code cannot tell: that the backend refuses the fork's ``ours`` and
``variant_generation`` attacks, and that its ``autodojo`` attack needs the cache pair. All
three must be registered by the installed fork: a catalogue of code that lacks them is
refused (it is not the fork this profile describes).
"""

from agentprov_dojo.catalogue import SourceProfile
from agentprov_dojo.source import DojoSource

#: why the fork's own generation attacks are refused (the spec's words)
_NOT_OFFERED = "refused on AutoDojo (exit 5): the fork's '{}' attack is not offered (R-23.12, decision 7)"

SOURCE = DojoSource(SourceProfile(
    name="autodojo", backend="autodojo",
    refused={a: _NOT_OFFERED.format(a) for a in ("ours", "variant_generation")},
    attack_needs={"autodojo": ["--autodojo-cache", "--autodojo-variant"]}))
