"""The mapper ``examplebench.capture``: an examplebench session's capture/0.1 log to an AER.

examplebench's worker is AgentDojo-shaped (a loop of model calls, each reply's tool calls
run in order, the cell scored at the end), so agentprov's ``DojoCaptureMapper`` maps its
capture log: header, model calls and their wire attempts, tool results linked to the call
that asked for them, notes, the end record's status, utility and security, the register
codes of a damaged log or a failed session. examplebench keeps no native log, so the
live-versus-native check says so; what is left to write is the mapper's name and version.
"""

from agentprov_core.api import DojoCaptureMapper


class CaptureMapper(DojoCaptureMapper):
    # the name and version plugin.py's MapperRef declares (a reference that differs from
    # its mapper is refused when it loads)
    name = "examplebench.capture"
    version = "0.2.0"
    source = "examplebench"  # the source of a capture whose header names none
    no_native = "examplebench keeps no native log"


MAPPER = CaptureMapper()
