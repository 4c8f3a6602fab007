"""Work reaches the worker only by a job's import path (broadside/delivery/queues.py names
them; the web side never imports `jobs`): each path names a function defined in the module
the path says, not one re-exported there, so the name a reader greps for is where the code is."""

from __future__ import annotations

import importlib
import inspect

from broadside.delivery import queues


def test_every_job_path_names_a_function_defined_where_it_says():
    paths = {name: value for name, value in vars(queues).items()
             if name.isupper() and isinstance(value, str) and value.startswith("jobs.")}
    assert len(paths) >= 6, paths  # the slices, transactional, automations, evaluations, imports, bulk
    for name, path in paths.items():
        module_name, function_name = path.rsplit(".", 1)
        function = getattr(importlib.import_module(module_name), function_name)
        assert inspect.isfunction(function), (name, path)
        assert function.__module__ == module_name, (name, path, function.__module__)
