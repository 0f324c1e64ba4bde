"""The ``sandbox-exec`` profile (macOS Seatbelt, SBPL) and its digest.

This build records the profile's digest so that a run names which profile it would need,
but it cannot run the macOS probe: it was written and tested on Linux, where
``sandbox-exec`` does not exist. A macOS build records the probe as ``not run``, and
``--containment sandbox-exec`` is refused there too until a probe passes (see
docs/containment.md).
"""

from __future__ import annotations

from functools import cache

from agentprov_core.base.digests import sha256_hex

FORMAT = "agentprov-sandbox-exec-profile/0.1"

#: Parameters (``-D NAME=VALUE``): ENV_DIR, PYTHON_PREFIX, STAGING, HOME (private),
#: TMP, REPO, USER_HOME, PORT_A, PORT_B.
PROFILE = r"""(version 1)
(deny default)
(allow process-fork process-exec (with no-sandbox-inheritance-denied))
(allow signal (target same-sandbox))
(allow sysctl-read mach-lookup ipc-posix-shm)
(allow file-read-metadata)
(allow file-read*
  (subpath "/usr/lib") (subpath "/usr/share") (subpath "/System") (subpath "/Library/Apple")
  (subpath "/private/etc/ssl") (literal "/dev/null") (literal "/dev/urandom")
  (subpath (param "PYTHON_PREFIX")) (subpath (param "ENV_DIR"))
  (subpath (param "STAGING")) (subpath (param "HOME")) (subpath (param "TMP")))
(deny file-read*
  (regex #"/\.env$") (regex #"/\.env\.[^/]*$") (subpath (param "REPO"))
  (subpath (string-append (param "USER_HOME") "/.ssh"))
  (subpath (string-append (param "USER_HOME") "/.aws"))
  (subpath (string-append (param "USER_HOME") "/.config/gh"))
  (subpath (string-append (param "USER_HOME") "/Library/Keychains")))
(allow file-write* (subpath (param "STAGING")) (subpath (param "HOME")) (subpath (param "TMP"))
  (literal "/dev/null"))
(allow network-outbound (remote tcp (string-append "localhost:" (param "PORT_A")))
                        (remote tcp (string-append "localhost:" (param "PORT_B"))))
"""


@cache
def profile_sha256() -> str:
    return sha256_hex((FORMAT + "\n" + PROFILE).encode())
