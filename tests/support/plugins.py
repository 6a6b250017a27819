"""Plug-in distributions installed by hand: a dist-info folder on PYTHONPATH."""

from __future__ import annotations


def install_fake_distribution(root, name, module_source, module_name):
    """A dist-info folder on PYTHONPATH is what importlib.metadata finds: no pip needed."""
    (root / f"{module_name}.py").write_text(module_source)
    # Wheel naming: the name part of the folder has underscores (PEP 427); a dash would
    # make importlib.metadata read the name as "dldoctor".
    info = root / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[dldoctor.checks]\n{module_name} = {module_name}\n")
