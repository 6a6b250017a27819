"""A host with identifying values planted everywhere a snapshot could carry them, and the
list of those values."""

from __future__ import annotations

import base64
import ipaddress
import json
import shutil

from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import HOSTS

FQDN, SHORT = "dgx-planted-07.corp.planted-domain.example", "dgx-planted-07"
USER = "alicia_planted"
IPV4 = ("192.168.77.12", "10.20.30.40", "8.8.4.4", "172.16.5.9", "169.254.3.7")
IPV6 = ("2001:4860:4860::8844", "fe80::ba3f:d2ff:fe12:3456", "fd12:3456:789a::1")
MACS = ("b8:3f:d2:12:34:56", "0c:42:a1:9a:bc:de")
GUIDS = ("0c42:a103:0077:5c7e", "0c42:a103:0077:5c7f")
DMI_SERIAL, DMI_UUID = "SGH123PLANTED", "4C4C4544-0042-3510-8051-B4C04F4E3732"
HF_TOKEN = "hf_PlantedTokenAbcdefGhijkLmnop123456"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTEDKEY"
URL_USER, URL_PASS = "proxyuser77", "Hunter2Planted"
GPU_UUID = "GPU-5d2c7e11-6a9b-4c1d-8e3f-0a1b2c3d4e5f"
GPU_SERIAL = "1651221099887"


def planted_host(root):
    shutil.copytree(HOSTS / "hgx-h100x8-healthy", root, symlinks=True)
    b = BundleBuilder(root)
    b.file("/etc/hostname", FQDN + "\n").file("/proc/sys/kernel/hostname", SHORT + "\n")
    b.command(["hostname", "-f"], FQDN + "\n")
    b.file("/etc/hosts", f"127.0.0.1 localhost\n{IPV4[0]} {FQDN} {SHORT}\n{IPV6[0]} {SHORT}\n")
    b.file("/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n"
           f"{USER}:x:1000:1000:Alicia:/home/{USER}:/bin/bash\n")  # fmt: skip
    env = [f"USER={USER}", f"HOME=/home/{USER}", f"HF_TOKEN={HF_TOKEN}",
           f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", f"MASTER_ADDR={IPV4[1]}",
           f"HTTPS_PROXY=http://{URL_USER}:{URL_PASS}@proxy.example.org:3128/",
           f"VIRTUAL_ENV=/home/{USER}/venv", "PATH=/usr/bin:/bin", "LANG=C.UTF-8"]  # fmt: skip
    b.file("/proc/self/environ", "\0".join(env) + "\0")
    b.file(f"/home/{USER}/venv/pyvenv.cfg", f"home = /home/{USER}/venv/bin\n")
    b.file("/sys/class/dmi/id/product_serial", DMI_SERIAL + "\n")
    b.file("/sys/class/dmi/id/product_uuid", DMI_UUID.lower() + "\n")
    b.command(["dmidecode", "-t", "system"],
              f"System Information\n\tSerial Number: {DMI_SERIAL}\n\tUUID: {DMI_UUID}\n")  # fmt: skip
    b.file("/sys/class/net/eno1/address", MACS[0] + "\n")
    b.file("/sys/class/infiniband/mlx5_0/node_guid", GUIDS[0] + "\n")
    b.file("/sys/class/infiniband/mlx5_0/sys_image_guid", GUIDS[1] + "\n")
    b.command(["ip", "addr"],
              f"2: eno1: <UP>\n    link/ether {MACS[0]} brd ff:ff:ff:ff:ff:ff\n"
              f"    inet {IPV4[0]}/24 brd 192.168.77.255 scope global eno1\n"
              f"    inet6 {IPV6[0]}/64 scope global\n    inet6 {IPV6[1]}/64 scope link\n"
              f"3: eno2:\n    link/ether {MACS[1]}\n    inet {IPV4[2]} peer {IPV4[3]}\n"
              f"    inet {IPV4[4]}/16\n    inet6 {IPV6[2]}/64\n")  # fmt: skip
    b.command(["ibstat"], f"Node GUID: 0x{GUIDS[0].replace(':', '')}\n")
    nvml = json.loads((root / "nvml.json").read_text())
    fields = nvml["value"]["devices"][0]["fields"]
    fields["uuid"]["value"], fields["serial"]["value"] = GPU_UUID, GPU_SERIAL
    (root / "nvml.json").write_text(json.dumps(nvml))
    b.command(["nvidia-smi", "-q", "-x"],
              f"<gpu><serial>{GPU_SERIAL}</serial><uuid>{GPU_UUID}</uuid></gpu>\n")  # fmt: skip
    environ_b64 = base64.b64encode(f"HF_TOKEN={HF_TOKEN}\0USER={USER}".encode()).decode()
    b.answer("read", "/proc/1/environ", status="ok", content_b64=environ_b64)
    b.file("/report-note", f"ssh {USER}@{SHORT} {FQDN.upper()}\n")
    return root


def planted_values() -> list[str]:
    values = [FQDN, SHORT, "corp.planted-domain.example", USER, DMI_SERIAL, DMI_UUID, HF_TOKEN,
              AWS_SECRET, URL_USER, URL_PASS, GPU_UUID, GPU_UUID[4:], GPU_SERIAL,
              *IPV4, *IPV6, *MACS, *GUIDS]  # fmt: skip
    values += [v.replace(":", "") for v in MACS + GUIDS]
    values += [ipaddress.ip_address(v).exploded for v in IPV6]
    values += [str(ipaddress.ip_address(v).exploded).replace(":", "") for v in IPV6[1:]]
    return values
