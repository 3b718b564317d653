"""The library's names: functions stay functions, whatever was imported before."""

from __future__ import annotations

import importlib
import types

import chute


def test_export_and_load_stay_functions_after_their_packages_are_imported() -> None:
    first = chute.export  # the lazy name, resolved once
    importlib.import_module("chute.export")  # what the CLI and users' `import chute.export` do
    importlib.import_module("chute.export.exporter")
    importlib.import_module("chute.load.loader")
    importlib.import_module("chute.timing")
    assert isinstance(chute.export, types.FunctionType) and chute.export is first
    assert isinstance(chute.load, types.FunctionType)
    assert isinstance(chute.time_queries, types.FunctionType)
    from chute import export, load

    assert isinstance(export, types.FunctionType) and isinstance(load, types.FunctionType)


def test_every_public_name_is_there() -> None:
    for name in chute.__all__:
        assert getattr(chute, name) is not None, name
    importlib.import_module("chute.load.forget")
    assert isinstance(chute.forget, types.FunctionType) and "forget" in chute.__all__
    assert chute.ForgetReport.__name__ == "ForgetReport" and "ForgetReport" in chute.__all__


def test_copy_stays_a_function_after_its_package_is_imported() -> None:
    first = chute.copy
    importlib.import_module("chute.copy")
    importlib.import_module("chute.copy.copier")
    assert isinstance(chute.copy, types.FunctionType) and chute.copy is first
    from chute import CopyOptions, CopyReport, copy

    assert isinstance(copy, types.FunctionType)
    assert CopyOptions().method == "auto" and CopyReport("a", "b", "t", "t").ok
    assert {"copy", "CopyOptions", "CopyReport"} <= set(chute.__all__)
