"""A snapshot carries no secret, under any name: the environment keeps the values of what a
check reads only, and every captured value is scanned for secret shapes (docs/bundle-format.md,
"Redaction")."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from dldoctor.snapshots import take
from tests.support.bundlebuilder import BundleBuilder
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import FIXTURES, HOSTS

JOURNAL = "journalctl -k -b --no-pager -o short-iso-precise".split()
# Shapes written the way their vendors issue them (none is a live key).
TOKENS = {
    "github": "ghp_" + "R7pQ2xZ9kL4mN8vB3cF6hJ1tY5wE0aSdGuIo",
    "github_pat": "github_pat_11ABCDEFG0" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5o",
    "gitlab": "glpat-" + "xR4tY7uI9oP2aS5dF8gH",
    "slack_bot": "xoxb-" + "2048163421-4096327843-Zq8Rt5Wp2Lk9Mn3Bv6Cx",
    "aws_id": "AKIA" + "Q3ZK7TR2WPLM4NXB",
    "aws_id2": "ASIA" + "Y6HJ2KD9QWER5TZU",
    "google": "AIza" + "SyD4kR7pQ2xZ9mN8vB3cF6hJ1tY5wE0aSdGu",
    "stripe": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "openai": "sk-proj-" + "Zt8Rq5Wp2Lk9Mn3Bv6CxA1sD4fG7hJ0k",
    "huggingface": "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm12345678",
    "npm": "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "sendgrid": "SG." + "aB3dE5gH7jK9mN1pQ3sT5v" + ".X7zA9cE1gI3kM5oQ7sU9wY1aC3eG5iK7mO9qS1uW3y",
    "jwt": "eyJhbGciOiJIUzI1NiJ9"
    + ".eyJzdWIiOiJjaS1qb2IiLCJpYXQiOjE3MDB9"
    + ".Q2xZ9kL4mN8vB3cF6hJ1tY5wE0aSdGuIoR7pQ2x",
    "slurm_jwt": "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9"
    + ".eyJleHAiOjE3OTk5OTk5OTksInN1biI6InJvb3QifQ.pL8kQ4mZ2nR6tW9xB3vF7hJ1sD5gA0cE",
    "entropy": "Zt8Rq5Wp2Lk9Mn3Bv6CxA1sD4fG7hJ0kUy",
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8tW3vN5u",
    "webhook": "T0AB12CDE/B0FG34HIJ/Zq8Rt5Wp2Lk9Mn3Bv6CxA1sD",
    "private_key": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7Vj9QzR4kL",
}
PLAIN = {  # secrets no shape gives away: only their place does
    "sshpass": "correct-horse-battery",
    "cifs": "Winter2026cifs",
    "ceph": "AQBrLk5lAAAAABAAbcdefg==",
    "rootpw": "r00tPlanted",
    "ipmi": "ipmiPlanted7",
    "db_user": "dbadmin",
    "db_pass": "PlantedDbPass",
    "domain": "db01.corp-internal.example",
    "proxy_pass": "ProxyPlanted9",
    "myvar": "plain-value-of-myvar",
    "flag": "FlagPlanted42",
    "mount_pass": "MountPlanted3",
    "opt_secret": "OptSecretPlanted",
    "opt_token": "OptTokenPlanted",
}


def _shifted(value: str) -> str:
    """Another key of the same shape: its last 8 letters and digits moved on by one, each in
    its class (a-z, A-Z, 0-9)."""
    out = list(value)
    for i in range(len(out) - 8, len(out)):
        c = out[i]
        for first, size in (("a", 26), ("A", 26), ("0", 10)):
            if first <= c < chr(ord(first) + size):
                out[i] = chr(ord(first) + (ord(c) - ord(first) + 1) % size)
    return "".join(out)


# a second key of each shape, in values of names a bundle keeps (CUDA_*: scanned, not
# dropped) and in the kernel command line's options
VARIANTS = {f"{k}_2": _shifted(v) for k, v in TOKENS.items() if k != "private_key"}


def planted_bundle(root):
    t, p = TOKENS, PLAIN
    shutil.copytree(HOSTS / "hgx-h100x8-healthy", root, symlinks=True)
    b = BundleBuilder(root)
    env = {
        "SSHPASS": p["sshpass"], "CI_JOB_JWT": t["jwt"],
        "SLACK_WEBHOOK_URL": f"https://hooks.slack.com/services/{t['webhook']}",
        "MYVAR": t["github"], "SOMETHING": t["aws_id"], "SLURM_JWT": t["slurm_jwt"],
        "DATABASE_URL": f"postgres://{p['db_user']}:{p['db_pass']}@{p['domain']}:5432/app",
        "PLAIN": p["myvar"], "GOOGLE": t["google"], "STRIPE": t["stripe"],
        "OPENAI": t["openai"], "HF": t["huggingface"], "NPMRC": t["npm"],
        # allow-listed names whose values still hide something
        "CUDA_PLANTED": t["gitlab"], "NCCL_PLANTED": f"http://u:{p['proxy_pass']}@10.1.2.3/",
        "CONDA_PLANTED": t["sendgrid"], "LD_PRELOAD": t["github_pat"],
        "PATH": "/usr/local/cuda/bin:/usr/bin:/bin", "NCCL_SOCKET_IFNAME": "eth9",
        "CUDA_HOME": "/usr/local/cuda",
    }  # fmt: skip
    variants = sorted(VARIANTS.items())
    env.update((f"CUDA_PLANTED_{i}", v) for i, (_, v) in enumerate(variants[::2]))
    b.file("/proc/self/environ", "".join(f"{k}={v}\0" for k, v in env.items()))
    options = " ".join(f"mod.opt{i}={v}" for i, (_, v) in enumerate(variants[1::2]))
    cmdline = (HOSTS / "hgx-h100x8-healthy/files/proc/cmdline").read_text().strip()
    b.file("/proc/cmdline", f"{cmdline} rootpassword={p['rootpw']} ipmi.pass={p['ipmi']} "
                            f"token={t['aws_id2']} {options}\n")  # fmt: skip
    mounts = (HOSTS / "hgx-h100x8-healthy/files/proc/self/mountinfo").read_text()
    mounts += (
        f"900 30 0:90 / /mnt/share rw,relatime - cifs //fs/share rw,vers=3.0,username=svc,"
        f"password={p['cifs']},uid=0\n"
        f"901 30 0:91 / /mnt/ceph rw - ceph 10.0.0.5:/ rw,name=admin,secret={p['ceph']}\n"
        f"902 30 0:92 / /mnt/x rw - fuse.sshfs h:/ rw,pass={p['mount_pass']},"
        f"client_secret={p['opt_secret']},auth_token={p['opt_token']}\n"
    )
    b.file("/proc/self/mountinfo", mounts)
    journal = (HOSTS / f"hgx-h100x8-healthy/commands/{'_'.join(JOURNAL)}/stdout").read_text()
    when = "2026-11-29T08:00:10.000000+0000 gpu-node kernel:"
    journal += "".join(f"{when} {line}\n" for line in (
        f"audit: cmd=\"python train.py --token {t['github']} --password {p['flag']}\"",
        f"audit: cmd=\"curl -H 'Authorization: Bearer {t['jwt']}'\"",
        f"app: aws {t['aws_id']} {t['aws_secret']} slack {t['slack_bot']}",
        f"app: key {t['entropy']} pat {t['github_pat']} hf {t['huggingface']}",
        f"app: -----BEGIN RSA PRIVATE KEY-----{t['private_key']}",
        f"app: openai={t['openai']} sendgrid {t['sendgrid']} npm {t['npm']}",
        f"app: stripe {t['stripe']} google {t['google']} gitlab {t['gitlab']}",
    ))  # fmt: skip
    b.command(JOURNAL, journal)
    return root


def planted() -> list[str]:
    values = list(TOKENS.values()) + list(VARIANTS.values()) + list(PLAIN.values())
    values += ["corp-internal.example"]
    return values


def test_no_planted_secret_reaches_the_archive(tmp_path):
    source = planted_bundle(tmp_path / "source")
    found = "\n".join(p.read_text("latin-1") for p in source.rglob("*") if p.is_file())
    # 18 shapes, 17 more of the same shapes, 14 plain secrets and a domain, over 4 sources
    assert len(set(planted())) >= 50 and all(v in found for v in planted())  # the plant took
    archive = tmp_path / "out.tar.gz"
    proc = run_dldoctor("snapshot", "--from", str(source), "-o", str(archive),
                        "--redact-map", str(tmp_path / "map.json"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    texts = []
    with tarfile.open(archive) as tar:
        for member in tar:
            texts.append(member.name)
            if member.isfile():
                data = tar.extractfile(member).read().decode("utf-8", "surrogateescape")
                texts.append(data)
                if member.name.endswith(".json"):  # \u escapes must hide nothing either
                    texts.append(json.dumps(json.loads(data), ensure_ascii=False))
    everything = "\n".join(texts)
    assert [v for v in planted() if v in everything] == []
    # What was planted was captured: the variables keep their names, the journal its lines.
    assert "SSHPASS=\0" in everything and "MYVAR=\0" in everything
    assert "--password secret-" in everything and "rootpassword=secret-" in everything


def test_a_redacted_bundle_gives_the_env_checks_the_same_verdicts(tmp_path):
    source = planted_bundle(tmp_path / "source")
    out = tmp_path / "redacted"
    proc = run_dldoctor("snapshot", "--dir", "--from", str(source), "-o", str(out),
                        "--redact-map", str(tmp_path / "map.json"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    before = report_of(run_dldoctor("--check", "--json", "--from", str(source)))
    after = report_of(run_dldoctor("--check", "--json", "--from", str(out)))
    verdicts = {f["id"]: f["status"] for f in before["findings"]}
    assert verdicts["nccl.env"] == "fail"  # NCCL_SOCKET_IFNAME=eth9 was read
    assert {f["id"]: f["status"] for f in after["findings"]} == verdicts
    summaries = {f["id"]: f["summary"] for f in after["findings"]}
    assert summaries["nccl.env"] == {f["id"]: f["summary"] for f in before["findings"]}["nccl.env"]


SOS = "sosreport-host0-2026-12-01-hsxafrq.tar.xz"  # a sos report names its host: host0


def test_the_host_name_is_in_no_file_name_of_a_snapshot(tmp_path):
    shutil.copy(FIXTURES / "foreign" / "sos" / SOS, tmp_path / SOS)
    env = {**os.environ, "DLDOCTOR_NO_PLUGINS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "dldoctor", "snapshot", "--from", SOS, "--redact-map", "map"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    archive = Path(proc.stdout.strip())
    assert re.fullmatch(r"dldoctor-snapshot-\d{8}T\d{6}Z\.tar\.gz", archive.name)
    assert json.loads((tmp_path / "map").read_text())["kinds"]["host"] == {"host0": "host-0001"}
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        (manifest,) = [n for n in names if n.endswith("/manifest.json")]
        argv = json.loads(tar.extractfile(manifest).read())["argv"]
    assert all("host0" not in name for name in names)
    assert argv[2:4] == ["--from", "sosreport-host-0001-2026-12-01-hsxafrq.tar.xz"]


def test_the_default_name_is_free_of_the_host_name():
    when = datetime.datetime(2026, 12, 1, 12, 45, 49, tzinfo=datetime.timezone.utc)
    assert take.default_name(when=when) == "dldoctor-snapshot-20261201T124549Z.tar.gz"
    assert take.default_name(archive=False, when=when) == "dldoctor-snapshot-20261201T124549Z"
    assert take.default_dest(archive=True).endswith(".tar.gz")
