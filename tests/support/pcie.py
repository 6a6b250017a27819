"""PCIe links made up for a test."""

from __future__ import annotations

from dldoctor.facts.pcie import PcieLink


def link(address, klass, cur_w, max_w, upstream=(), vendor="15b3", cur=16.0, top=16.0):
    return PcieLink(address, vendor, "0000", klass, "", cur, top, cur_w, max_w, tuple(upstream),
                    None, None, None, None, "")  # fmt: skip
