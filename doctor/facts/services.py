"""systemd services, asked through `systemctl is-active` (replayable as a command)."""

from __future__ import annotations

from typing import NamedTuple

from dldoctor.facts import FactContext, fact


class ServiceState(NamedTuple):
    name: str
    state: str  # "active", "inactive", "failed", ... ; "" when systemd could not say
    note: str = ""

    @property
    def active(self) -> bool:
        return self.state == "active"


# What `systemctl is-active` prints (systemctl(1)); "unknown" for a unit systemd does not
# know. Anything else is not an answer about the unit.
UNIT_STATES = frozenset(
    ("active", "reloading", "inactive", "failed", "activating", "deactivating",
     "maintenance", "refreshing", "unknown")
)  # fmt: skip


def service_fact(name: str):
    @fact(f"service.{name}")
    def service(ctx: FactContext) -> ServiceState:
        answer = ctx.host.run(["systemctl", "is-active", name]).require()
        if not answer.ok:
            return ServiceState(name, "", answer.describe())
        state = answer.text.strip().splitlines()[0] if answer.text.strip() else ""
        # is-active prints the state even when it exits non-zero (inactive, failed,
        # unknown); with no systemd it prints nothing on stdout and explains on stderr.
        if not state:
            said = answer.value.stderr.decode("utf-8", "replace").strip()
            return ServiceState(
                name, "", said.splitlines()[0] if said else "systemd did not answer"
            )
        if state not in UNIT_STATES:
            return ServiceState(name, "", f"systemctl is-active answered {state[:40]!r}")
        return ServiceState(name, state)

    return service


fabricmanager = service_fact("nvidia-fabricmanager")
persistenced = service_fact("nvidia-persistenced")
