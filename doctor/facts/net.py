"""Network devices by name: /sys/class/net interfaces and /sys/class/infiniband HCAs."""

from __future__ import annotations

from typing import NamedTuple

from dldoctor.facts import FactContext, fact


class Interfaces(NamedTuple):
    net: tuple[str, ...] = ()
    infiniband: tuple[str, ...] = ()


@fact("net.interfaces")
def interfaces(ctx: FactContext) -> Interfaces:
    net = ctx.host.listdir("/sys/class/net").require()
    ib = ctx.host.listdir("/sys/class/infiniband").require()
    return Interfaces(net.value if net.ok else (), ib.value if ib.ok else ())
