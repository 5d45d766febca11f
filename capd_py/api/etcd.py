"""What an etcd cluster reports about itself: plain data for the KCP's decisions (the client is in kube/)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EtcdMember:
    id: int
    name: str                          # kubeadm names members after their node
    client_urls: tuple[str, ...] = ()

    @property
    def hex_id(self) -> str:
        return format(self.id, "x")


@dataclass(frozen=True)
class EtcdStatus:
    leader: int                        # member ID of the current leader, 0 when unknown
