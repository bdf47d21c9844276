"""Reaching a Celery task by its name, for the code that enqueues it.

A tasks module imports the services its tasks run; a service that enqueues one of those tasks
(after a commit, say) names it instead of importing the tasks module back, so neither module
needs the other to be loaded first.
"""

from celery import Task, current_app


def task_named(name: str) -> Task:
    """The registered task `name`, with its own options (retries, queue, eager mode in the demo
    and the tests). The apps' tasks modules are imported on first use, as a worker's start-up
    imports them (Celery's autodiscovery), in a process that has not needed them yet."""
    if name not in current_app.tasks:
        current_app.loader.import_default_modules()
    return current_app.tasks[name]
