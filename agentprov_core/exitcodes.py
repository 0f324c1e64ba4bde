"""The process exit codes (specification N.1.3)."""

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    FAILURES = 1
    USAGE = 2
    ENVIRONMENT = 3
    REFUSED = 4
    UNSUPPORTED = 5
    INTERNAL = 70
    INTERRUPTED = 130
