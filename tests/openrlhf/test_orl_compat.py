"""The start-up check against the installed OpenRLHF."""

from __future__ import annotations

import pytest

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")

from gtpo.openrlhf import compat


def test_installed_openrlhf_has_every_internal_the_adapter_overrides():
    assert compat.check_openrlhf().startswith("0.11.")


def test_a_missing_internal_is_named(monkeypatch):
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

    monkeypatch.delattr(RemoteExperienceMaker, "_flatten_results")
    missing = r"RemoteExperienceMaker\._flatten_results"
    with pytest.raises(compat.OpenRLHFIncompatibleError, match=missing):
        compat.check_openrlhf()


def test_another_release_is_refused_with_the_pin_to_install(monkeypatch):
    monkeypatch.setattr(compat.metadata, "version", lambda name: "0.12.0")
    with pytest.raises(compat.OpenRLHFIncompatibleError, match=r"openrlhf>=0.11,<0.12"):
        compat.check_openrlhf()


def test_launcher_exits_2_when_openrlhf_does_not_fit(monkeypatch, caplog):
    from gtpo.openrlhf.__main__ import main

    monkeypatch.setattr(compat.metadata, "version", lambda name: "0.10.4")
    monkeypatch.setattr("gtpo.openrlhf.__main__.check_openrlhf", compat.check_openrlhf)
    with pytest.raises(SystemExit) as exit_info:
        main(["--actor.model_name_or_path", "m"])
    assert exit_info.value.code == 2
    assert "supports OpenRLHF 0.11.x, found 0.10.4" in caplog.text
