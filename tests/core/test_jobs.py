"""Services reach the tasks they enqueue by name (core.jobs), so no tasks module is imported
back by the services it runs."""

import os
import subprocess
import sys

import pytest
from celery.exceptions import Retry

from config.celery import app
from core.jobs import GaranteTask, task_named
from tests.servers import ROOT


def test_a_task_is_found_by_name_in_a_web_thread_that_never_imported_its_module():
    """A web server's process has not imported the apps' tasks modules when its first write
    enqueues a task; the task found is the project's, with its own retry options, from any
    thread."""
    script = (
        "import sys, threading, django\n"
        "django.setup()\n"
        "from core.jobs import task_named\n"
        "print('support.tasks' in sys.modules)\n"
        "found = []\n"
        "def look():\n"
        "    task = task_named('support.tasks.case_notify_staff')\n"
        "    found.append((task.app.main, task.max_retries, 'support.tasks' in sys.modules))\n"
        "thread = threading.Thread(target=look)\n"
        "thread.start()\n"
        "thread.join()\n"
        "print(*found[0])\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONPATH": str(ROOT)}

    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "garante", "5", "True"]


def test_threads_asking_at_once_on_a_new_process_all_find_their_task():
    """A new web node's first writes come together: every thread finds its task, not only the
    one whose lookup imported the tasks modules."""
    script = (
        "import threading, django\n"
        "django.setup()\n"
        "from core.jobs import task_named\n"
        "names = ['support.tasks.case_notify_staff', 'sales.tasks.quote_email_send',\n"
        "         'core.challenge_deliver', 'agenda.appointments_mark_no_shows']\n"
        "barrier, found = threading.Barrier(8), []\n"
        "def look(name):\n"
        "    barrier.wait()\n"
        "    found.append(task_named(name).name == name)\n"
        "threads = [threading.Thread(target=look, args=(names[i % 4],)) for i in range(8)]\n"
        "[thread.start() for thread in threads]\n"
        "[thread.join() for thread in threads]\n"
        "print(found.count(True))\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONPATH": str(ROOT)}

    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["8"]


def test_a_name_no_task_has_is_an_error_not_a_silent_publish():
    """A mistyped name fails where it is used instead of sending a message no worker runs."""
    with pytest.raises(KeyError):
        task_named("support.tasks.no_such_task")


def garante_tasks() -> list:
    app.loader.import_default_modules()
    return [task for name, task in sorted(app.tasks.items()) if not name.startswith("celery.")]


def test_every_task_has_a_soft_and_a_hard_time_limit():
    limits = {
        task.name: (
            task.soft_time_limit or app.conf.task_soft_time_limit,
            task.time_limit or app.conf.task_time_limit,
        )
        for task in garante_tasks()
    }

    assert len(limits) >= 12
    assert {name for name, (soft, hard) in limits.items() if not soft or not hard} == set()
    assert {name for name, (soft, hard) in limits.items() if soft >= hard} == set()
    assert limits["core.challenge_deliver"] == (60, 90)
    assert limits["agenda.appointments_mark_no_shows"] == (300, 360)


def test_every_task_is_a_garante_task_and_retries_through_celery():
    tasks = garante_tasks()

    assert all(isinstance(task, GaranteTask) for task in tasks)
    retried = {task.name for task in tasks if getattr(task, "autoretry_for", ())}
    assert {
        "core.challenge_deliver",
        "sales.tasks.quote_email_send",
        "support.tasks.case_notify_staff",
    } <= retried
    assert all(app.tasks[name].retry_backoff for name in retried)


@pytest.mark.parametrize("name", ["agenda.appointment_message_send", "core.challenge_deliver"])
def test_a_retry_with_other_arguments_waits_the_tasks_own_backoff_with_jitter(name):
    """A message that left while its record failed is retried to record it (other arguments,
    so not by autoretry_for): it waits as autoretry would, doubling per retry up to the
    task's maximum, with full jitter, never a fixed countdown."""
    app.loader.import_default_modules()
    task = app.tasks[name]
    factor = int(max(1.0, float(task.retry_backoff)))

    def waits(retries: int) -> set[float]:
        seen = set()
        task.push_request(id="t", retries=retries, is_eager=True, called_directly=False)
        try:
            for _ in range(200):
                with pytest.raises(Retry) as retried:
                    task.retry_after_backoff(args=(1,), kwargs={"sent": {}}, exc=OSError())
                seen.add(retried.value.when)
        finally:
            task.pop_request()
        return seen

    first, fourth = waits(0), waits(3)
    assert first <= set(range(factor + 1))
    assert fourth <= set(range(min(factor * 8, getattr(task, "retry_backoff_max", 600)) + 1))
    assert len(fourth) > 1  # jittered
    assert max(fourth) > factor
