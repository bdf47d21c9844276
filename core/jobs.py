"""The base of every Garante task, and reaching a task by its name.

A tasks module imports the services its tasks run; a service that enqueues one of those tasks
(after a commit, say) names it instead of importing the tasks module back, so neither module
needs the other to be loaded first.
"""

import threading
from typing import Any

from celery import Task, current_app
from celery.exceptions import Retry
from celery.utils.time import get_exponential_backoff_interval


class GaranteTask(Task):
    """The app's task class (config.celery): Celery's own, but for retries in eager mode.

    A worker retries a task (`autoretry_for`, `self.retry`) by queueing it again after its
    backoff. Run eagerly (the demo, the tests) with exceptions propagating
    (CELERY_TASK_EAGER_PROPAGATES, so a failure is seen where it happens), Celery lets the
    Retry escape `apply()` to the caller instead of running the retry, which it does when
    exceptions do not propagate. This runs it in place, at once, as that path does: the same
    arguments and one more retry, so an eagerly run task ends as a worker's would (delivered,
    or out of retries with the task's last error).
    """

    def apply(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        try:
            return super().apply(args, kwargs, **options)
        except Retry as retry:
            if retry.sig is None:
                raise
            return retry.sig.apply(retries=(options.get("retries") or 0) + 1)

    def retry_after_backoff(self, **options: Any) -> Retry:
        """`retry(**options)` after the wait `autoretry_for` would give this retry: the task's
        own `retry_backoff` doubled per retry up to `retry_backoff_max`, with its
        `retry_jitter`. For a retry with other arguments than the failed run's (a message that
        left while its record failed is retried to record it, not to send it again), which
        autoretry cannot make."""
        countdown = get_exponential_backoff_interval(
            factor=int(max(1.0, float(getattr(self, "retry_backoff", 1)))),
            retries=self.request.retries,
            maximum=int(getattr(self, "retry_backoff_max", 600)),
            full_jitter=getattr(self, "retry_jitter", True),
        )
        return self.retry(countdown=countdown, **options)


_importing = threading.Lock()


def task_named(name: str) -> Task:
    """The registered task `name`, with its own options (retries, queue, eager mode in the demo
    and the tests). The apps' tasks modules are imported on first use, as a worker's start-up
    imports them (Celery's autodiscovery), in a process that has not needed them yet."""
    if name not in current_app.tasks:
        # One thread imports them; the others wait for it. Celery's autodiscovery runs once,
        # in the first thread that asks: without the lock the others return at once, before
        # its imports end, and find no task (7 of 8 threads asking together on a new process;
        # a new web node's first concurrent writes).
        with _importing:
            if name not in current_app.tasks:
                current_app.loader.import_default_modules()
    return current_app.tasks[name]
