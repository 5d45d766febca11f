"""The randomness the controllers hand to the decisions: name suffixes and bootstrap tokens."""

from __future__ import annotations

import pytest

from capd_py.controllers import entropy
from capd_py.reconcile import kubeadmconfig as kc

pytestmark = pytest.mark.unit


def test_suffixes_spell_no_words() -> None:
    got = {entropy.random_suffix() for _ in range(50)}
    assert len(got) > 45 and all(len(s) == 5 and not set(s) & set("aeiou013") for s in got)


def test_bootstrap_tokens_are_kubeadms_and_differ() -> None:
    t = entropy.bootstrap_token()
    assert kc.TOKEN_RE.match(t) and entropy.bootstrap_token() != t
