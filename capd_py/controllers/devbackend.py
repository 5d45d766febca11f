"""The Dev* kinds' backend switch (upstream v1.14's backendReconcilerFactory): one kind, the docker backend's
functions or the inMemory backend's, chosen per object by `spec.backend` on every pass."""

from __future__ import annotations

from capd_py.api import infrakinds
from capd_py.controllers.context import Ctx
from capd_py.controllers.skeleton import KindFn, Outcome, Subject


def by_backend(docker: KindFn, in_memory: KindFn) -> KindFn:
    async def step(ctx: Ctx, sub: Subject) -> Outcome:
        if infrakinds.backend(sub.obj) == infrakinds.BACKEND_IN_MEMORY:
            return await in_memory(ctx, sub)
        return await docker(ctx, sub)
    return step
