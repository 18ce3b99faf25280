"""The engine: a Task runs a sub-topology's processors for one partition; the TopologyTestDriver runs them without a broker."""
