"""The fault harness (:mod:`scripts.fault.harness`) and its topology (:mod:`scripts.fault.fault_topology`)."""
