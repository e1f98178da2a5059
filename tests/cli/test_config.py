from __future__ import annotations

from pathlib import Path

import pytest

from config import ConfigInvalid, load_settings
from tools.render_docs import iter_settings_table


def test_defaults(home: Path) -> None:
    s = load_settings()
    assert s.home == home
    assert s.qdrant.url == ""
    assert s.embedding.model == "sentence-transformers/all-MiniLM-L6-v2"
    assert s.rerank.enabled is False
    assert s.workers["decay"].enabled is True


def test_nested_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__QDRANT__URL", "http://qdrant.internal:6333")
    monkeypatch.setenv("BRAIN__WORKERS__DECAY__ENABLED", "false")
    s = load_settings()
    assert s.qdrant.url == "http://qdrant.internal:6333"
    assert s.workers["decay"].enabled is False
    assert s.workers["decay"].interval_s == 6 * 3600  # the rest of the section keeps defaults


def test_legacy_opencode_brain_names_are_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QDRANT_HOST", "qd.local")
    monkeypatch.setenv("QDRANT_PORT", "7000")
    monkeypatch.setenv("FAST_MODEL_ID", "my/fast")
    monkeypatch.setenv("HARD_MODEL_PROVIDER", "nscale")
    monkeypatch.setenv("STALE_DAYS_THRESHOLD", "30")
    monkeypatch.setenv("GRAPH_PATH", "/tmp/g.json")
    s = load_settings()
    assert s.qdrant.url == "http://qd.local:7000"
    assert s.llm.fast_model == "my/fast"
    assert s.llm.hard_provider == "nscale"
    assert s.decay.stale_days == 30
    assert s.graph_path == Path("/tmp/g.json")


def test_dotenv_and_toml_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "brain.toml").write_text('[memory]\ndefault_project = "from-toml"\n'
                                        '[decay]\nstale_days = 10\n')
    (tmp_path / ".env").write_text("BRAIN__DECAY__STALE_DAYS=20\nEMBEDDING_MODEL=offline/hash-384\n")
    s = load_settings()
    assert s.memory.default_project == "from-toml"
    assert s.decay.stale_days == 20  # .env beats brain.toml
    assert s.embedding.model == "offline/hash-384"
    monkeypatch.setenv("BRAIN__DECAY__STALE_DAYS", "5")
    assert load_settings().decay.stale_days == 5  # environment beats .env
    assert load_settings(decay={"stale_days": 3}).decay.stale_days == 3  # arguments win


def test_bad_value_names_field_and_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__RETRIEVAL__DENSE_WEIGHT", "2.5")
    with pytest.raises(ConfigInvalid) as err:
        load_settings()
    msg = str(err.value)
    assert "retrieval.dense_weight" in msg and "BRAIN__RETRIEVAL__DENSE_WEIGHT" in msg


def test_conflicting_store_options_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__QDRANT__URL", "http://x:6333")
    monkeypatch.setenv("BRAIN__QDRANT__LOCAL_PATH", "/tmp/q")
    with pytest.raises(ConfigInvalid, match="not both"):
        load_settings()


def test_secrets_redacted_in_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN__LLM__API_KEY", "hf_supersecretvalue")
    s = load_settings()
    assert "hf_supersecretvalue" not in str(s.redacted())


def test_env_example_documents_every_setting() -> None:
    example = (Path(__file__).resolve().parents[2] / ".env.example").read_text()
    missing = [env for env, _, _ in iter_settings_table() if env not in example]
    assert missing == []


def test_readme_and_env_example_are_generated_from_settings() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(root / "tools" / "render_docs.py"), "--check"],
                          capture_output=True, text=True, cwd=root)
    assert proc.returncode == 0, proc.stdout


def test_every_setting_the_table_lists_is_a_known_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The unknown-name check refuses no real setting: every variable of the settings table
    (dict sections, endpoints and workers included) set at once loads."""
    from config import unknown_settings

    for env, _, _ in iter_settings_table():
        monkeypatch.setenv(env.replace("<ID>", "LOCAL").replace("<NAME>", "DECAY"), "1")
    monkeypatch.setenv("BRAIN__EMBEDDING__ENDPOINTS__LOCAL__API_KEY", "k")
    monkeypatch.setenv("BRAIN__WORKERS__ENRICHMENT__ENABLED", "false")
    assert unknown_settings() == []
    monkeypatch.setenv("BRAIN__WORKERS__DECAY__ENABLD", "false")
    [problem] = unknown_settings()
    assert "did you mean BRAIN__WORKERS__DECAY__ENABLED?" in problem
