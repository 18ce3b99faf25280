"""Side-by-side benchmark of streamproc against Quix Streams and faust-streaming (``bench_peers.py``).

``common`` holds the pure parts (data, expected outputs, checks, statistics, the table); the peer
programs (``streamproc_sessions``, ``quix_app``, ``faust_app``, ``passthrough``) each run in their
own process, the Quix and faust ones in their own venvs (``venvs``).
"""
