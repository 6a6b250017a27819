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
])  # fmt: skip
def test_bad_policies_name_the_problem(tmp_path, text, message):
    with pytest.raises(PolicyError) as info:
        load_policy(write(tmp_path, text))
    assert message in str(info.value) and "\n" not in str(info.value)


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
