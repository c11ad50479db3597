"""`mailmortem watch`: follow logs as they are written (follow), read each chunk of new lines with the loader
`diagnose` reads files with into a DuckDB state of the watch's own (state), and turn what changed into events and
exit decisions (run). Hooks run a user's command per new duplicate (hooks). Reads never write anything but that
state: the watched logs are only opened for reading."""
