"""``flywheel dashboard RUNS_DIR``: a local web page over run directories (curves, trajectories,
the actor timeline, alerts), served by the standard library with its page shipped in ``static/``."""
