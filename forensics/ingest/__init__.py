"""Reading logs into a case: find the files (sources), tell their syntax (detect), map their keys
(fields), parse and stage them in DuckDB (load), and open the case (case)."""
