"""Policy files and check selection."""

from __future__ import annotations

import pytest

from dldoctor.policy import Policy, PolicyError, SupportedOs, load_policy
from dldoctor.registry import builtin_checks, ordered, select


def write(tmp_path, text):
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return str(path)


def test_builtin_defaults_are_the_guides_numbers():
    policy, source = load_policy(None)
    assert source == "built-in"
    assert policy.kernel.min_version == "5.15"
    assert SupportedOs("ubuntu", "22.04") in policy.os.supported
    assert {s.id for s in policy.os.supported} == {"ubuntu", "rhel", "rocky", "almalinux", "debian"}


def test_a_site_file_overrides_a_subset(tmp_path):
    policy, source = load_policy(
        write(
            tmp_path,
            """
[kernel]
min_version = "6.8"
[memory]
min_total_gib = 512
[os]
supported = [{ id = "ubuntu", min_version = "24.04" }, { id = "rhel", min_version = 9 }]
""",
        )
    )
    assert source.endswith("policy.toml")
    assert policy.kernel.min_version == "6.8"
    assert policy.memory.min_total_gib == 512.0
    assert policy.os.supported == (SupportedOs("ubuntu", "24.04"), SupportedOs("rhel", "9"))
    assert policy.timeouts == Policy().timeouts


@pytest.mark.parametrize("text, message", [
    ("[kernel]\nminimum = '5'\n", "unknown key 'minimum' at [kernel]"),
    ("[gpus]\ncount = 8\n", "unknown key 'gpus' at top level"),
    ("[memory]\nmin_total_gib = 'lots'\n", "memory.min_total_gib must be a float"),
    ("[kernel]\nmin_version = 5.15\n", "kernel.min_version must be a str"),
    ("[os]\nsupported = 'ubuntu'\n", "os.supported must be a list"),
    ("[kernel\n", "not valid TOML"),
    ("[kernel]\nmin_version = 'abc'\n", "kernel.min_version must be a version number such as \"5.15\", not 'abc'"),
    ("[gpu]\nmin_driver = 'x'\n", "gpu.min_driver must be a version number"),
    ("[os]\nsupported = [{id = 'ubuntu', min_version = 'lts'}]\n", "os.supported[0].min_version must be a version number"),
    ("[firmware]\nminimums = [{match = 'MT4129', min_version = ''}]\n", "firmware.minimums[0].min_version must be a version"),
    ("[memory]\nmin_devshm_gib = -1\n", "memory.min_devshm_gib must not be negative, not -1"),
    ("[gpu]\nexpected_count = -8\n", "gpu.expected_count must not be negative"),
    ("[limits]\nmin_nofile = -1\n", "limits.min_nofile must not be negative"),
    ("[storage]\nfail_free_percent = 150\n", "storage.fail_free_percent must be a percentage from 0 to 100"),
    ("[storage]\nwarn_free_percent = -5\n", "storage.warn_free_percent must be a percentage"),
    ("[timeouts]\ncommand_s = 1e7\n", "timeouts.command_s must be more than 0 and at most 3600 seconds"),
])  # fmt: skip
def test_bad_policies_name_the_problem(tmp_path, text, message):
    with pytest.raises(PolicyError) as info:
        load_policy(write(tmp_path, text))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_every_value_rule_names_a_policy_key():
    import dataclasses
    import typing

    from dldoctor.policy import RULES

    def keys(cls, where=""):
        for f in dataclasses.fields(cls):
            hint = typing.get_type_hints(cls)[f.name]
            if typing.get_origin(hint) is tuple:
                hint = typing.get_args(hint)[0]
            if dataclasses.is_dataclass(hint):
                yield from keys(hint, f"{where}{f.name}.")
            else:
                yield f"{where}{f.name}"

    assert set(RULES) <= set(keys(Policy))
    # The built-in defaults obey the rules a file is held to.
    for key in RULES:
        value = Policy()
        for part in key.split("."):
            if isinstance(value, tuple):  # a list of tables: its first entry, if any
                value = value[0] if value else None
            value = getattr(value, part, None)
        assert value is None or RULES[key](value) == "", key


def test_missing_policy_file(tmp_path):
    with pytest.raises(PolicyError, match="cannot read policy"):
        load_policy(str(tmp_path / "nope.toml"))


def test_builtin_checks_are_discovered_with_unique_dotted_ids():
    specs = builtin_checks()
    ids = [s.id for s in specs]
    assert len(ids) == len(set(ids))
    assert {"system.os.release", "system.kernel.version", "system.memory", "system.python",
            "system.container"} <= set(ids)  # fmt: skip
    assert all("." in i and i == i.lower() for i in ids)


def test_select_by_id_prefix_and_category():
    specs = ordered(builtin_checks())
    assert [s.id for s in select(specs, ["system.kernel.version"], [])] == ["system.kernel.version"]
    assert {s.id for s in select(specs, ["system.kernel"], [])} == {"system.kernel.version"}
    assert len(select(specs, ["system"], [])) == len([s for s in specs if s.category == "system"])
    skipped = select(specs, [], ["system.memory"])
    assert "system.memory" not in {s.id for s in skipped} and len(skipped) == len(specs) - 1
    # "system.mem" is not a prefix at a dot: it must not match system.memory.
    with pytest.raises(ValueError, match="no check matches 'system.mem'"):
        select(specs, ["system.mem"], [])
    with pytest.raises(ValueError, match="leave no check to run"):
        select(specs, ["system.memory"], ["system"])


def test_every_policy_key_is_documented():
    import dataclasses
    import re
    from pathlib import Path

    doc = (Path(__file__).parent.parent / "docs" / "policy.md").read_text()
    rows = [line.split("|")[1] for line in doc.splitlines() if line.startswith("| `[")]
    for section in dataclasses.fields(Policy):
        for key in dataclasses.fields(section.default_factory()):
            written = re.compile(
                rf"`\[{section.name}\][^|]*\b{key.name}\b|`\[\[{section.name}\.{key.name}\]\]"
            )
            assert any(written.search(row) for row in rows), f"[{section.name}] {key.name}"
