"""The application file for ``spark-submit``: ``streamproc reprocess`` with the same arguments.

``spark-submit`` runs a Python application from a file path, so this module is that file::

    spark-submit --master yarn --deploy-mode client --conf spark.executor.instances=4 \\
        --py-files topologies.zip \\
        "$(python -c 'import streamproc.spark.submit as s; print(s.__file__)')" \\
        topologies.sessions --input clicks=kafka:clicks --bootstrap-servers broker:9092 --output hdfs:///out/sessions

Without ``--master`` among the reprocess arguments the master, and every setting given to
``spark-submit``, are the ones it was given. Exit status as ``streamproc reprocess``.
"""

from __future__ import annotations

import sys

from streamproc.spark.cli import main

if __name__ == "__main__":
    sys.exit(main())
