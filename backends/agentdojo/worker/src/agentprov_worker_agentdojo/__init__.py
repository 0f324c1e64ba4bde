"""AgentDojo's worker package: the ``agentdojo`` source, served in its backend environment.

Registered under the entry-point group ``agentprov.worker`` (``agentprov_backend.host``).
What the installed agentdojo cannot tell the catalogue (which attacks the backend refuses,
which options an attack needs, whose version is the benchmark's) is stated in the profile;
the rest is read from the installed package, and cells run through AgentDojo's own runner
(``agentprov_dojo``).
"""

from agentprov_dojo.catalogue import SourceProfile
from agentprov_dojo.source import DojoSource

SOURCE = DojoSource(SourceProfile(name="agentdojo", backend="agentdojo"))
