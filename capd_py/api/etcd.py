"""What an etcd cluster reports about itself: plain data for the KCP's decisions (the client is in kube/)."""

from __future__ import annotations

from dataclasses import dataclass

# etcd's AlarmType enum (etcdserverpb.AlarmType), by number as `etcdctl alarm list -w json` prints it
ALARM_NAMES = {0: "NONE", 1: "NOSPACE", 2: "CORRUPT"}


@dataclass(frozen=True)
class EtcdMember:
    id: int
    name: str                          # kubeadm names members after their node; "" until the member has started
    client_urls: tuple[str, ...] = ()
    is_learner: bool = False           # kubeadm joins a member as a learner and promotes it once it caught up

    @property
    def hex_id(self) -> str:
        return format(self.id, "x")


@dataclass(frozen=True)
class EtcdStatus:
    leader: int                        # member ID of the current leader, 0 when unknown
    errors: tuple[str, ...] = ()       # what the member reports wrong with itself (StatusResponse.errors)


@dataclass(frozen=True)
class EtcdAlarm:
    member_id: int
    alarm: str                         # ALARM_NAMES' value: NOSPACE, CORRUPT (NONE: no alarm)
