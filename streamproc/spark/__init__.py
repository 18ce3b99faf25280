"""Offline reprocessing: run a topology's own tasks over history on PySpark.

Importing this package does not import PySpark; the functions below do, when called.
"""

from __future__ import annotations

from .engine import StagePlan, load_topology, process_batches
from .jars import fetch_jars, installed_jars, jar_dir
from .job import Computed, ReprocessResult, compute, plan_stages, reprocess
from .ordering import ORDERS, event_time_order, offset_order
from .session import spark_session
from .sources import InputSpec, OutputSpec, parse_input, parse_output

__all__ = [
    "ORDERS",
    "Computed",
    "InputSpec",
    "OutputSpec",
    "ReprocessResult",
    "StagePlan",
    "compute",
    "event_time_order",
    "fetch_jars",
    "installed_jars",
    "jar_dir",
    "load_topology",
    "offset_order",
    "parse_input",
    "parse_output",
    "plan_stages",
    "process_batches",
    "reprocess",
    "spark_session",
]
