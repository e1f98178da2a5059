"""ModelRouter against a real loopback OpenAI-compatible server (tests/fake_llm.py)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from brain.clock import ManualClock
from brain.errors import LLMError
from brain.llm.router import ModelRouter, TokenCapReached
from tests.fake_llm import FakeLLM
from tests.timing import HANG_S

SECRET = "sk-test-SECRET-123456"
HELLO = [{"role": "user", "content": "hello there"}]


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


def make_router(fake: FakeLLM, **kwargs: object) -> ModelRouter:
    defaults: dict[str, object] = {
        "base_url": fake.base_url,
        "api_key": SECRET,
        "timeout_s": 5.0,
        "max_retries": 2,
        "backoff_s": 0.01,
        "clock": ManualClock(datetime(2026, 3, 1, 12, tzinfo=UTC)),
    }
    defaults.update(kwargs)
    return ModelRouter(**defaults)  # type: ignore[arg-type]


def test_offline_router_is_not_configured_and_raises() -> None:
    router = ModelRouter()
    assert router.configured is False
    assert router.status()["mode"] == "offline"
    with pytest.raises(LLMError):
        router.complete(HELLO, "fast")


def test_modes() -> None:
    assert ModelRouter(base_url="http://127.0.0.1:1/v1").status()["mode"] == "openai-compatible"
    hf = ModelRouter(api_key="hf_x")
    assert hf.configured and hf.status()["mode"] == "hf-providers"


def test_complete_routes_tiers_and_counts_tokens(fake_llm: FakeLLM, tmp_path: Path) -> None:
    usage = tmp_path / "usage.json"
    fake_llm.script("fast answer", "hard answer")
    router = make_router(fake_llm, usage_path=usage, fast_model="small", hard_model="big")

    assert router.complete(HELLO, "fast", max_tokens=50) == "fast answer"
    assert router.complete(HELLO, "hard") == "hard answer"

    first, second = fake_llm.requests
    assert first.path == "/v1/chat/completions"
    assert first.body["model"] == "small" and first.body["max_tokens"] == 50
    assert second.body["model"] == "big"
    assert first.headers.get("authorization") == f"Bearer {SECRET}"

    status = router.status()
    # fake usage: prompt = len("hello there")//4 = 2, completion = len(text)//4
    assert status["tokens_today"] == (2 + 2) + (2 + 2)
    assert status["calls"] == 2 and status["failures"] == 0

    again = make_router(fake_llm, usage_path=usage)
    assert again.status()["tokens_today"] == 8


def test_usage_resets_on_a_new_utc_day(fake_llm: FakeLLM, tmp_path: Path) -> None:
    clock = ManualClock(datetime(2026, 3, 1, 23, 59, tzinfo=UTC))
    usage = tmp_path / "usage.json"
    router = make_router(fake_llm, usage_path=usage, clock=clock)
    router.complete(HELLO, "fast")
    assert router.status()["tokens_today"] > 0
    clock.advance(minutes=2)
    assert router.status()["tokens_today"] == 0
    assert make_router(fake_llm, usage_path=usage, clock=clock).status()["tokens_today"] == 0


def test_http_500_is_retried(fake_llm: FakeLLM) -> None:
    fake_llm.script(("status", 500), "recovered")
    router = make_router(fake_llm)
    assert router.complete(HELLO, "fast") == "recovered"
    assert len(fake_llm.requests) == 2
    status = router.status()
    assert status["failures"] == 1 and "500" in status["last_error"]


def test_persistent_500_raises_after_retries(fake_llm: FakeLLM) -> None:
    fake_llm.script(("status", 503), ("status", 503), ("status", 503), "too late")
    router = make_router(fake_llm, max_retries=2)
    with pytest.raises(LLMError) as caught:
        router.complete(HELLO, "fast")
    assert caught.value.code == "LLM_ERROR"
    assert len(fake_llm.requests) == 3


def test_client_error_is_not_retried(fake_llm: FakeLLM) -> None:
    fake_llm.script(("status", 401), "never")
    router = make_router(fake_llm)
    with pytest.raises(LLMError):
        router.complete(HELLO, "fast")
    assert len(fake_llm.requests) == 1


def test_slow_reply_times_out_then_raises(fake_llm: FakeLLM) -> None:
    fake_llm.script(("sleep", 2 * HANG_S, "slow"), ("sleep", 2 * HANG_S, "slow"))
    router = make_router(fake_llm, timeout_s=0.3, max_retries=1)
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        router.complete(HELLO, "fast")
    assert time.monotonic() - started < HANG_S  # two 0.3 s timeouts, not the server's minutes
    assert "timed out" in caught.value.message
    assert router.status()["failures"] == 2


def test_unreachable_server_raises_llm_error() -> None:
    router = ModelRouter(base_url="http://127.0.0.1:9/v1", max_retries=1, backoff_s=0.01)
    with pytest.raises(LLMError):
        router.complete(HELLO, "fast")


def test_daily_cap_pauses_calls(fake_llm: FakeLLM, tmp_path: Path) -> None:
    router = make_router(fake_llm, daily_token_cap=5, usage_path=tmp_path / "u.json")
    router.complete(HELLO, "fast")  # uses 4 tokens
    router.complete(HELLO, "fast")  # 8 >= 5: cap reached after this one
    with pytest.raises(TokenCapReached) as caught:
        router.complete(HELLO, "fast")
    assert caught.value.code == "LLM_TOKEN_CAP_REACHED"
    assert isinstance(caught.value, LLMError)
    assert len(fake_llm.requests) == 2
    status = router.status()
    assert status["paused_by_cap"] is True and status["daily_token_cap"] == 5
    # a restart keeps the cap reached
    restarted = make_router(fake_llm, daily_token_cap=5, usage_path=tmp_path / "u.json")
    assert restarted.status()["paused_by_cap"] is True


def test_api_key_never_in_status_or_logs(
    fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_llm.script(("status", 500), ("status", 500), ("status", 500), "ok")
    router = make_router(fake_llm)
    with pytest.raises(LLMError) as caught:
        router.complete(HELLO, "fast")
    router.complete(HELLO, "fast")
    assert SECRET not in str(router.status())
    assert SECRET not in caplog.text
    assert SECRET not in str(caught.value)
    assert SECRET not in repr(router.__dict__.get("_last_error"))


def test_threads_share_one_router(fake_llm: FakeLLM) -> None:
    router = make_router(fake_llm)
    threads = [threading.Thread(target=router.complete, args=(HELLO, "fast")) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    status = router.status()
    assert status["calls"] == 8 and status["tokens_today"] == 8 * 3  # "ok": 2 + 1 tokens each
