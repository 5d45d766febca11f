from __future__ import annotations

import re

import pytest

from capd_py.api import versions as v

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("s", ["v1.34.0", "v1.34.4", "v1.37.123", "v1.35.0-rc.1", "v1.36.2+capd.1",
                               "v1.35.0-alpha.0+build-7", "v0.0.0", "v2.10.3"])
def test_valid_semver(s: str) -> None:
    assert v.is_valid(s)
    assert str(v.parse(s)) == s


@pytest.mark.parametrize("s", ["", "1.34.4", "v1.34", "v1", "v1.34.4.1", "v01.34.4", "v1.034.4", "v1.34.04",
                               "V1.34.4", "v1.34.x", "latest", "v1.34.4-", "v1.34.4+", " v1.34.4"])
def test_invalid_semver(s: str) -> None:
    assert not v.is_valid(s)
    with pytest.raises(ValueError, match="must be a semantic version"):
        v.parse(s)


@pytest.mark.parametrize("s,ok", [
    ("v1.34.0", True), ("v1.34.4", True), ("v1.35.7", True), ("v1.36.0", True), ("v1.37.99", True),
    ("v1.37.0-rc.0", True), ("v1.30.0", True), ("v1.31.14", True), ("v1.33.9", True), ("v1.30.0-rc.1", True),
    ("v1.29.15", False), ("v1.3.0", False), ("v1.300.0", False),
    ("v1.38.0", False), ("v2.34.0", False), ("v0.34.0", False),
    ("1.34.4", False), ("garbage", False),
])
def test_supported_range(s: str, ok: bool) -> None:
    assert v.is_supported(s) is ok
    # the regex the CRDs use (CEL, RE2) agrees with the Python check
    assert bool(re.match(v.supported_pattern(), s)) is ok


def test_check_supported_messages() -> None:
    assert v.check_supported("v1.34.4") == v.Version(1, 34, 4)
    with pytest.raises(ValueError, match=r"not supported: supported range is v1\.30\.0 to v1\.37\.x"):
        v.check_supported("v1.29.0")
    with pytest.raises(ValueError, match="must be a semantic version"):
        v.check_supported("1.34")


def test_ordering_follows_semver() -> None:
    ordered = ["v1.34.0-alpha.1", "v1.34.0-alpha.2", "v1.34.0-beta.0", "v1.34.0", "v1.34.1", "v1.35.0",
               "v1.35.10"]
    parsed = [v.parse(s) for s in ordered]
    assert sorted(reversed(parsed)) == parsed
    assert v.parse("v1.34.0+a") == v.parse("v1.34.0+b")  # build metadata does not count
    assert v.parse("v1.35.2").minor_version == "v1.35"


def test_constants_consistent() -> None:
    assert v.is_supported(v.MIN_SUPPORTED)
    assert v.is_supported(v.DEFAULT_VERSION)
    assert tuple(sorted(v.SUPPORTED_MINORS)) == v.SUPPORTED_MINORS
    assert v.supported_range_text() == "v1.30.0 to v1.37.x"


def test_range_covers_upstream_v1_13_workload_versions() -> None:
    """Upstream Cluster API v1.13 supports workload clusters v1.30.x .. v1.36.x (docs/book/src/reference/versions.md)"""
    for minor in range(30, 37):
        assert v.is_supported(f"v1.{minor}.0") and v.is_supported(f"v1.{minor}.25")


@pytest.mark.parametrize("n", [0, 1, 4, 9, 10, 19, 99, 100, 305])
def test_patch_at_least_regex(n: int) -> None:
    r = re.compile("^" + v._patch_at_least(n) + "$")
    for k in range(0, 1200):
        assert bool(r.match(str(k))) is (k >= n), (n, k)
    assert not r.match(f"0{n + 1}")


def test_cel_rules_use_the_module_patterns() -> None:
    fmt, rng = v.cel_rules()
    assert v.SEMVER_PATTERN in fmt["rule"] and "semantic version" in fmt["message"]
    assert v.supported_pattern() in rng["rule"] and v.supported_range_text() in rng["message"]
    assert "'" not in v.SEMVER_PATTERN + v.supported_pattern()
