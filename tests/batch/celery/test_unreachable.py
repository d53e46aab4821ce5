"""Which errors mean "Redis could not be reached" to a waiting batch: a connection error,
or anything Celery raised from one once its own retries were spent. One seen under load
in CI: ``BackendGetMetaError("failed to get meta")`` from ``redis.ConnectionError`` ended
a batch as an internal error instead of waiting out the outage."""

from __future__ import annotations

import pytest

from orchestrator.batch.celery.task_results import _unreachable

celery_exceptions = pytest.importorskip("celery.exceptions")
redis_exceptions = pytest.importorskip("redis.exceptions")

CONNECTION_ERRORS = (redis_exceptions.ConnectionError, ConnectionError)


def raised_from(outer: BaseException, cause: BaseException) -> BaseException:
    """``outer`` as ``raise outer from cause`` leaves it."""
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(
    "exc",
    [
        redis_exceptions.ConnectionError("Error 111 connecting to 127.0.0.1"),
        raised_from(RuntimeError(""), redis_exceptions.ConnectionError("refused")),
        raised_from(
            celery_exceptions.BackendGetMetaError("failed to get meta", task_id="t"),
            redis_exceptions.ConnectionError("refused"),
        ),
        raised_from(
            RuntimeError("wrapped twice"),
            raised_from(celery_exceptions.BackendGetMetaError("m", task_id="t"), ConnectionError()),
        ),
    ],
    ids=["connection", "result-consumer", "backend-meta", "twice"],
)
def test_an_outage_however_celery_wraps_it(exc: BaseException) -> None:
    assert _unreachable(exc, CONNECTION_ERRORS)


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("a bug"),
        raised_from(RuntimeError("x"), ValueError("a bug")),
        celery_exceptions.BackendGetMetaError("failed to get meta", task_id="t"),
    ],
    ids=["bug", "runtime-from-bug", "backend-error-alone"],
)
def test_anything_else_is_not_an_outage(exc: BaseException) -> None:
    assert not _unreachable(exc, CONNECTION_ERRORS)
