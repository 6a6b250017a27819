"""Host and domain names -> host-0001, domain-0001.example (an FQDN keeps its dot)."""

from __future__ import annotations

from dldoctor.snapshots.redact.pseudonyms import Pseudonyms

# Where a host's own names are written; each file holds just the name.
HOSTNAME_FILES = ("files/etc/hostname", "files/proc/sys/kernel/hostname")
DOMAIN_FILE = "files/proc/sys/kernel/domainname"
# Words that also mean something else in a bundle (a distro, a sysfs folder, a default
# account): a host or user of that name is replaced only where it is known to be one
# (its hostname file, its passwd line, /home/<name>, $USER), never as a bare word.
COMMON_WORDS = frozenset(
    "localhost localdomain local lan home internal none (none) ubuntu debian centos rhel "
    "redhat fedora rocky alma almalinux suse opensuse linux gpu gpus node nodes nvidia cuda "
    "root admin user users docker kubernetes host server compute test default nobody daemon "
    "sys bin system devices kernel module driver class bus pci net block".split()
)


class HostMap:
    def __init__(self, store: Pseudonyms) -> None:
        self.store = store

    def host(self, name: str) -> str:
        name = name.strip().rstrip(".")
        if "." not in name:
            return self.store.named("host", name.lower(), "host-%04d")
        short, domain = name.split(".", 1)
        return f"{self.host(short)}.{self.domain(domain)}"

    def domain(self, domain: str) -> str:
        return self.store.named("domain", domain.lower(), "domain-%04d.example")
