"""Supported Kubernetes versions: the single source for admission rules (CRD CEL) and code.

Versions are semver strings with a leading ``v`` (``v1.34.4``); pre-release and build suffixes
(``v1.35.0-rc.1``, ``v1.34.4+capd``) are accepted the way semver defines them. The supported range is
every patch of the minors in ``SUPPORTED_MINORS`` (major 1), starting at ``MIN_SUPPORTED``.

The range admits what upstream Cluster API v1.13 supports for workload clusters (v1.30.x to v1.36.x, see
upstream docs/book/src/reference/versions.md) plus v1.37 (admitted since capd-py's first release). Upstream's
webhooks check only the semver format, never a range; inside the range, a version without a locally built
node image is not an admission error: the DockerMachine reports it (``ContainerProvisioned=False``, reason
``ImageNotFound``, naming ``make images K8S_VERSION=<version>``) and proceeds once the image exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

SUPPORTED_MAJOR = 1
SUPPORTED_MINORS: tuple[int, ...] = tuple(range(30, 38))  # v1.30 .. v1.37
MIN_SUPPORTED = "v1.30.0"
MAX_SUPPORTED_MINOR = f"v{SUPPORTED_MAJOR}.{SUPPORTED_MINORS[-1]}"
DEFAULT_VERSION = "v1.34.4"  # the version whose binaries/images `make images` builds
# The upstream Cluster API release whose behaviour capd-py follows: the version `capd-py init` records for its
# providers in upstream clusterctl's inventory (docs/clusterctl.md), and the clusterctl `make clusterctl` builds.
CLUSTER_API_VERSION = "v1.13.6"

_NUM = r"(0|[1-9][0-9]*)"
_PRE = r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?"
_BUILD = r"(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?"
# A semantic version with a mandatory "v": vMAJOR.MINOR.PATCH[-pre][+build]. RE2 compatible (CEL).
SEMVER_PATTERN = rf"^v{_NUM}\.{_NUM}\.{_NUM}{_PRE}{_BUILD}$"
_SEMVER_RE = re.compile(SEMVER_PATTERN)


def supported_range_text() -> str:
    return f"{MIN_SUPPORTED} to {MAX_SUPPORTED_MINOR}.x"


@total_ordering
@dataclass(frozen=True)
class Version:
    major: int
    minor: int
    patch: int
    pre: str = ""
    build: str = ""

    def __str__(self) -> str:
        s = f"v{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            s += f"-{self.pre}"
        if self.build:
            s += f"+{self.build}"
        return s

    def _key(self) -> tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]:
        # semver precedence: a pre-release sorts before the release; build metadata is ignored
        parts: tuple[tuple[int, int | str], ...] = tuple(
            (0, int(p)) if p.isdigit() else (1, p) for p in self.pre.split(".")) if self.pre else ()
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, parts)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def minor_version(self) -> str:
        return f"v{self.major}.{self.minor}"


def parse(version: str) -> Version:
    """Parse ``vX.Y.Z[-pre][+build]``; raises ValueError with a clear message otherwise."""
    m = _SEMVER_RE.match(version or "")
    if not m:
        raise ValueError(f"invalid Kubernetes version {version!r}: must be a semantic version vMAJOR.MINOR.PATCH, "
                         f"e.g. {DEFAULT_VERSION}")
    pre = (m.group(4) or "")[1:]
    build = (m.group(6) or "")[1:]
    return Version(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, build)


def is_valid(version: str) -> bool:
    return bool(_SEMVER_RE.match(version or ""))


def is_supported(version: str) -> bool:
    try:
        v = parse(version)
    except ValueError:
        return False
    lo = parse(MIN_SUPPORTED)
    return (v.major == SUPPORTED_MAJOR and v.minor in SUPPORTED_MINORS
            and (v.major, v.minor, v.patch) >= (lo.major, lo.minor, lo.patch))


def check_supported(version: str) -> Version:
    """Parse and range-check; ValueError names the problem (format or range)."""
    v = parse(version)
    if not is_supported(version):
        raise ValueError(f"Kubernetes version {version} is not supported: supported range is "
                         f"{supported_range_text()}")
    return v


def _patch_at_least(n: int) -> str:
    """An RE2 fragment matching decimal integers (no leading zeros) >= n."""
    if n == 0:
        return _NUM
    s = str(n)
    alts = [rf"[1-9][0-9]{{{len(s)},}}"]  # more digits than n
    for i, ch in enumerate(s):  # same length: equal prefix, then a bigger digit, then anything
        d = int(ch)
        if d < 9:  # d + 1 >= 1, so a bigger leading digit is never a leading zero
            alts.append(s[:i] + f"[{d + 1}-9]" + "[0-9]" * (len(s) - i - 1))
    alts.append(s)
    return "(" + "|".join(alts) + ")"


def supported_pattern() -> str:
    """An RE2 regex (anchored) for versions in the supported range (any pre-release/build suffix)."""
    lo = parse(MIN_SUPPORTED)
    if lo.major != SUPPORTED_MAJOR or lo.minor != SUPPORTED_MINORS[0]:
        raise AssertionError("MIN_SUPPORTED must be a patch of the first supported minor")
    alts = []
    for minor in SUPPORTED_MINORS:
        patch = _patch_at_least(lo.patch) if minor == lo.minor else _NUM
        alts.append(rf"{minor}\.{patch}")
    return rf"^v{SUPPORTED_MAJOR}\.({'|'.join(alts)}){_PRE}{_BUILD}$"


def cel_rules() -> list[dict[str, str]]:
    """x-kubernetes-validations for a version string field: format first, then range (two messages)."""
    return [
        {"rule": f"self.matches({_cel_str(SEMVER_PATTERN)})",
         "message": f"must be a valid semantic version of the form vMAJOR.MINOR.PATCH (e.g. {DEFAULT_VERSION})"},
        {"rule": f"!self.matches({_cel_str(SEMVER_PATTERN)}) || self.matches({_cel_str(supported_pattern())})",
         "message": f"Kubernetes version is not supported: supported range is {supported_range_text()}"},
    ]


def _cel_str(s: str) -> str:
    """A CEL raw single-quoted string literal (no escape processing, so regexes stay readable)."""
    if "'" in s:
        raise ValueError("pattern must not contain a single quote")
    return f"r'{s}'"
