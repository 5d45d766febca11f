"""The randomness the controllers hand to the pure decisions (reconcile/ draws none: what it decides follows from
what it is given): Machine name suffixes and kubeadm bootstrap tokens, from the operating system's CSPRNG."""

from __future__ import annotations

import secrets

from capd_py.reconcile.kubeadmconfig import TOKEN_ALPHABET
from capd_py.reconcile.machineset import SUFFIX_ALPHABET


def random_suffix(n: int = 5) -> str:
    """A name suffix as upstream's (utilrand.String: consonants and digits that spell no words)."""
    return "".join(secrets.choice(SUFFIX_ALPHABET) for _ in range(n))


def bootstrap_token() -> str:
    """A kubeadm bootstrap token, `[a-z0-9]{6}.[a-z0-9]{16}`."""
    tid = "".join(secrets.choice(TOKEN_ALPHABET) for _ in range(6))
    sec = "".join(secrets.choice(TOKEN_ALPHABET) for _ in range(16))
    return f"{tid}.{sec}"
