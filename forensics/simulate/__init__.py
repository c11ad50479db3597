"""The simulator: a world of people and workers (world), the incident scenarios (scenarios), their
rendering as log files (render), and the run that writes a case with its truth (run)."""
